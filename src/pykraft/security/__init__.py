"""Authentication (SASL PLAIN and SCRAM) and authorization (ACLs): pure, like the cores that use them."""
