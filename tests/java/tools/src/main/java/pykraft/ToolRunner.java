package pykraft;

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.utils.Exit;

/**
 * Runs Kafka's command-line tools in this one JVM, one invocation per request, so a test pays the JVM
 * start once. Each line on stdin is one invocation: its time limit in ms, the tool's script name and its
 * arguments, separated by tabs (60000 TAB kafka-topics TAB --list ...). Each answer is one JSON line on
 * stdout, {"tool", "exit", "out", "err", "ms"}: the tool's System.out and System.err of that invocation
 * and its exit code (null when it ran past the time limit).
 *
 * <p>Kafka's tools exit through org.apache.kafka.common.utils.Exit, whose procedures are replaced here so
 * that an exit ends the invocation, not the JVM; the first code a tool passes is its exit code, as it
 * would be the JVM's (TopicCommand catches what the replaced exit throws and exits again with 1); a main
 * that returns is 0. The tools read an empty stdin. argparse4j's parseArgsOrFail (the metadata shell's
 * --help or a bad argument) calls System.exit itself, which ends this JVM. Threads a tool leaves behind
 * run on until the JVM halts at the end of the input (TransactionsCommand never closes its Admin, since
 * kafka-transactions.sh exits right after).
 */
public final class ToolRunner {
    // The classes behind Kafka's bin/*.sh scripts (kafka-run-class.sh CLASS), Kafka 4.x.
    static final Map<String, String> TOOLS = Map.ofEntries(
        Map.entry("kafka-topics", "org.apache.kafka.tools.TopicCommand"),
        Map.entry("kafka-configs", "kafka.admin.ConfigCommand"),
        Map.entry("kafka-consumer-groups", "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"),
        Map.entry("kafka-acls", "org.apache.kafka.tools.AclCommand"),
        Map.entry("kafka-transactions", "org.apache.kafka.tools.TransactionsCommand"),
        Map.entry("kafka-metadata-quorum", "org.apache.kafka.tools.MetadataQuorumCommand"),
        Map.entry("kafka-features", "org.apache.kafka.tools.FeatureCommand"),
        Map.entry("kafka-reassign-partitions", "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"),
        Map.entry("kafka-producer-perf-test", "org.apache.kafka.tools.ProducerPerformance"),
        Map.entry("kafka-consumer-perf-test", "org.apache.kafka.tools.ConsumerPerformance"),
        Map.entry("kafka-dump-log", "org.apache.kafka.tools.DumpLogSegments"),
        Map.entry("kafka-metadata-shell", "org.apache.kafka.shell.MetadataShell"));

    /** Thrown by the replaced exit and halt procedures: unwinds the tool's main to the runner. */
    static final class ExitCalled extends Error {
        final int code;

        ExitCalled(int code) {
            super("Exit.exit(" + code + ")", null, false, false);
            this.code = code;
        }
    }

    /** The code of the first Exit.exit or Exit.halt of the current invocation. */
    static volatile Integer firstExit;

    static Void exitWith(int code) {
        if (firstExit == null) {
            firstExit = code;
        }
        throw new ExitCalled(code);
    }

    public static void main(String[] argv) throws Exception {
        PrintStream answers = System.out;
        PrintStream stderr = System.err;
        BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.setIn(new ByteArrayInputStream(new byte[0]));
        Exit.setExitProcedure((code, message) -> exitWith(code));
        Exit.setHaltProcedure((code, message) -> exitWith(code));
        Exit.setShutdownHookAdder((name, runnable) -> { });
        String line;
        while ((line = requests.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            String[] request = line.split("\t", -1);
            Map<String, Object> answer =
                invoke(Long.parseLong(request[0]), request[1], List.of(request).subList(2, request.length));
            System.setOut(stderr);  // anything a leftover thread prints goes to the JVM's stderr
            System.setErr(stderr);
            answers.println(toJson(answer));
            answers.flush();
        }
        answers.flush();
        Runtime.getRuntime().halt(0);  // threads a tool left behind do not keep the JVM up
    }

    static Map<String, Object> invoke(long timeLimitMs, String tool, List<String> args) throws Exception {
        String className = TOOLS.get(tool);
        Map<String, Object> answer = new LinkedHashMap<>();
        answer.put("tool", tool);
        if (className == null) {
            answer.put("exit", 2);
            answer.put("out", "");
            answer.put("err", "unknown tool " + tool + "; known: " + TOOLS.keySet());
            answer.put("ms", 0);
            return answer;
        }
        Method main = Class.forName(className).getMethod("main", String[].class);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        Integer[] exit = {null};
        firstExit = null;
        Thread thread = new Thread(() -> {
            try {
                main.invoke(null, (Object) args.toArray(new String[0]));
                exit[0] = 0;
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (cause instanceof ExitCalled) {
                    exit[0] = ((ExitCalled) cause).code;
                } else {
                    cause.printStackTrace(System.err);
                    exit[0] = 1;  // an uncaught exception ends a JVM's main with 1
                }
            } catch (IllegalAccessException e) {
                e.printStackTrace(System.err);
                exit[0] = 1;
            }
        }, tool);
        long start = System.nanoTime();
        thread.start();
        thread.join(timeLimitMs);
        boolean finished = !thread.isAlive();
        if (!finished) {
            thread.interrupt();
            System.err.println("ToolRunner: " + tool + " still running after " + timeLimitMs + " ms");
        }
        System.out.flush();
        System.err.flush();
        answer.put("exit", !finished ? null : firstExit != null ? firstExit : exit[0]);
        answer.put("out", out.toString(StandardCharsets.UTF_8));
        answer.put("err", err.toString(StandardCharsets.UTF_8));
        answer.put("ms", (System.nanoTime() - start) / 1_000_000);
        return answer;
    }

    static String toJson(Map<String, Object> fields) {
        StringBuilder json = new StringBuilder("{");
        for (Map.Entry<String, Object> field : fields.entrySet()) {
            if (json.length() > 1) {
                json.append(", ");
            }
            quote(json, field.getKey());
            json.append(": ");
            Object value = field.getValue();
            if (value instanceof String) {
                quote(json, (String) value);
            } else {
                json.append(value);  // a number, or null
            }
        }
        return json.append('}').toString();
    }

    static void quote(StringBuilder json, String text) {
        json.append('"');
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                json.append('\\').append(c);
            } else if (c < 0x20) {
                json.append(String.format("\\u%04x", (int) c));
            } else {
                json.append(c);
            }
        }
        json.append('"');
    }
}
