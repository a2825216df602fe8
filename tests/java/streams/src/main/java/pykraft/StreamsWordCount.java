package pykraft;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * A Kafka Streams word count with processing.guarantee=exactly_once_v2 against pykraft (issue 33 item 3).
 *
 * <p>Usage: {@code StreamsWordCount BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC EXPECTED_WORDS STATE_DIR TIMEOUT_MS
 * [KEY=VALUE ...]}, the pairs being more Streams (and its clients') properties.
 * Lines of INPUT_TOPIC are split into words, re-keyed by word (the "words" repartition topic), counted
 * in an in-memory store (its "counts" changelog topic) and every new count goes to OUTPUT_TOPIC, with
 * the record cache off so each increment is one output record. A read_committed consumer of
 * OUTPUT_TOPIC watches the latest count per word; once they add up to EXPECTED_WORDS (the input is all
 * counted) the application closes. Consumed repartition records are purged (DeleteRecords) every second. stdout carries one JSON line per event (state change, uncaught
 * exception, progress) and a last verdict line {"check", "ok", "ms", "detail"}.
 */
public final class StreamsWordCount {
    public static final String APPLICATION_ID = "pykraft-word-count";

    private StreamsWordCount() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String input = args[1];
        String output = args[2];
        long expectedWords = Long.parseLong(args[3]);
        String stateDir = args[4];
        long timeoutMs = Long.parseLong(args[5]);
        long start = System.currentTimeMillis();

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, APPLICATION_ID);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // DeleteRecords on the repartition topic up to its committed offsets every second, not every 30 s
        props.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        for (int i = 6; i < args.length; i++) {
            String[] pair = args[i].split("=", 2);
            props.put(pair[0], pair[1]);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.split(" ")))
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long())
                        .withCachingDisabled())
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        List<String> states = new ArrayList<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((to, from) -> {
            synchronized (states) {
                states.add(to.name());
            }
            event("state", "\"from\":" + quote(from.name()) + ",\"to\":" + quote(to.name()), start);
        });
        streams.setUncaughtExceptionHandler(exception -> {
            failure.compareAndSet(null, exception);
            event("error", "\"detail\":" + quote(exception.toString()), start);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();

        long counted = 0;
        try (KafkaConsumer<String, Long> watcher = watcher(bootstrap)) {
            List<TopicPartition> partitions = new ArrayList<>();
            watcher.partitionsFor(output).forEach(p -> partitions.add(new TopicPartition(output, p.partition())));
            watcher.assign(partitions);
            watcher.seekToBeginning(partitions);
            Map<String, Long> latest = new HashMap<>();
            long lastReported = -1;
            while (counted < expectedWords
                    && failure.get() == null
                    && streams.state() != KafkaStreams.State.ERROR
                    && System.currentTimeMillis() - start < timeoutMs) {
                for (ConsumerRecord<String, Long> record : watcher.poll(Duration.ofMillis(200))) {
                    Long before = latest.put(record.key(), record.value());
                    counted += record.value() - (before == null ? 0 : before);
                }
                if (counted != lastReported) {
                    event("progress", "\"words\":" + counted, start);
                    lastReported = counted;
                }
            }
        }
        streams.close(Duration.ofSeconds(30));

        boolean ok = counted == expectedWords && failure.get() == null;
        String detail;
        synchronized (states) {
            detail = "counted " + counted + " of " + expectedWords + " words; states " + states
                    + (failure.get() == null ? "" : "; failed: " + failure.get());
        }
        System.out.println("{\"check\":\"streams.wordCount\",\"ok\":" + ok + ",\"ms\":"
                + (System.currentTimeMillis() - start) + ",\"detail\":" + quote(detail) + "}");
        System.out.flush();
        System.exit(0);
    }

    private static KafkaConsumer<String, Long> watcher(String bootstrap) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        return new KafkaConsumer<>(props, new StringDeserializer(), new LongDeserializer());
    }

    private static synchronized void event(String name, String fields, long start) {
        System.out.println("{\"event\":" + quote(name) + ",\"ms\":" + (System.currentTimeMillis() - start) + ","
                + fields + "}");
        System.out.flush();
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
