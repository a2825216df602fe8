pytest_plugins = ["pykraft.testing"]
