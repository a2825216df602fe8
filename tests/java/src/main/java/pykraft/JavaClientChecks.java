package pykraft;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.ClassicGroupDescription;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's own Java client against pykraft (issue 33). Every check prints one JSON line on stdout,
 * {"check": name, "ok": bool, "detail": ...}, which tests/interop/test_java_client.py asserts over.
 *
 * <p>Usage: JavaClientChecks SUITE BOOTSTRAP BROKERS [client.property=value ...]. SUITE "plain" drives
 * the producers, the consumers and the Admin calls; "secured" the ACL calls as a super user, with
 * the SASL properties given. BROKERS is how many brokers the cluster has: topics get that
 * replication factor (at most 3).
 */
public final class JavaClientChecks {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final int PARTITIONS = 3;
    private static final int PER_PARTITION = 10;
    private static final String ORDERS = "java-orders";
    private static final String OUT = "java-out";
    private static final String SCRATCH = "java-scratch";
    // What Kafka's brokers answer for includeAuthorizedOperations without an authorizer: every operation
    // the resource type supports (AuthHelper.authorizedOperations).
    private static final Set<AclOperation> TOPIC_OPERATIONS = Set.of(AclOperation.READ, AclOperation.WRITE,
            AclOperation.CREATE, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS);
    private static final Set<AclOperation> CLUSTER_OPERATIONS = Set.of(AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE);
    private static final Set<AclOperation> GROUP_OPERATIONS = Set.of(AclOperation.READ, AclOperation.DESCRIBE,
            AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS);

    private final String bootstrap;
    private final int brokers;
    private final short replicationFactor;
    private final Map<String, Object> clientProperties;
    private final Admin admin;

    private JavaClientChecks(String bootstrap, int brokers, Map<String, Object> clientProperties) {
        this.bootstrap = bootstrap;
        this.brokers = brokers;
        this.replicationFactor = (short) Math.min(brokers, 3);
        this.clientProperties = clientProperties;
        Map<String, Object> config = config();
        config.put("default.api.timeout.ms", 30000);
        config.put("request.timeout.ms", 15000);
        this.admin = Admin.create(config);
    }

    public static void main(String[] args) throws Exception {
        Map<String, Object> properties = new HashMap<>();
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            properties.put(kv[0], kv[1]);
        }
        JavaClientChecks checks = new JavaClientChecks(args[1], Integer.parseInt(args[2]), properties);
        try {
            if (args[0].equals("secured")) {
                checks.secured();
            } else {
                checks.plain();
            }
        } finally {
            checks.admin.close(Duration.ofSeconds(5));
        }
    }

    // ---------------------------------------------------------------- output

    @FunctionalInterface
    private interface Body {
        Object run() throws Exception;
    }

    private static void check(String name, Body body) {
        boolean ok;
        Object detail;
        long start = System.nanoTime();
        try {
            detail = body.run();
            ok = true;
        } catch (Throwable t) {
            ok = false;
            detail = describe(t);
            if (!(t instanceof AssertionError)) {
                t.printStackTrace();
            }
        }
        long elapsedMs = (System.nanoTime() - start) / 1_000_000;
        System.out.println("{\"check\": " + json(name) + ", \"ok\": " + ok + ", \"ms\": " + elapsedMs
                + ", \"detail\": " + json(detail) + "}");
        System.out.flush();
    }

    private static String describe(Throwable t) {
        Throwable cause = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
        StringBuilder out = new StringBuilder(cause.getClass().getName() + ": " + cause.getMessage());
        if (cause instanceof AssertionError) {
            return out.toString();
        }
        for (StackTraceElement frame : cause.getStackTrace()) {
            if (frame.getClassName().startsWith("pykraft.")) {
                out.append(" at ").append(frame);
                break;
            }
        }
        return out.toString();
    }

    private static String json(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Boolean || value instanceof Integer || value instanceof Long) {
            return value.toString();
        }
        if (value instanceof Map<?, ?> map) {
            return map.entrySet().stream()
                    .map(e -> json(String.valueOf(e.getKey())) + ": " + json(e.getValue()))
                    .collect(Collectors.joining(", ", "{", "}"));
        }
        if (value instanceof Collection<?> items) {
            return items.stream().map(JavaClientChecks::json).collect(Collectors.joining(", ", "[", "]"));
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : value.toString().toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }

    private static void expect(boolean condition, String what, Object got) {
        if (!condition) {
            throw new AssertionError(what + "; got " + got);
        }
    }

    /**
     * Metadata reaches the brokers after the controller commits it (as in Kafka): ask until it shows; a
     * failure counts as "not yet" until the wait is over.
     */
    private static <T> T eventually(Body supplier, java.util.function.Predicate<T> condition) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (true) {
            try {
                @SuppressWarnings("unchecked")
                T value = (T) supplier.run();
                if (condition.test(value) || System.nanoTime() > deadline) {
                    return value;
                }
            } catch (Exception e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
            }
            Thread.sleep(50);
        }
    }

    private static <T> T get(Future<T> future) throws Exception {
        return future.get(WAIT.toSeconds(), TimeUnit.SECONDS);
    }

    /** The future fails with ``type``; returns the exception's message. */
    private static String expectFailure(Future<?> future, Class<? extends Throwable> type) throws Exception {
        try {
            Object value = get(future);
            throw new AssertionError("expected " + type.getSimpleName() + "; got " + value);
        } catch (ExecutionException e) {
            expect(type.isInstance(e.getCause()), "expected " + type.getSimpleName(), e.getCause());
            return e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
        }
    }

    // ---------------------------------------------------------------- clients

    private Map<String, Object> config() {
        Map<String, Object> config = new HashMap<>(clientProperties);
        config.put("bootstrap.servers", bootstrap);
        return config;
    }

    private KafkaProducer<String, String> producer(Map<String, Object> extra) {
        Map<String, Object> config = config();
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        config.putAll(extra);
        return new KafkaProducer<>(config);
    }

    private KafkaConsumer<String, String> consumer(Map<String, Object> extra) {
        Map<String, Object> config = config();
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        config.putAll(extra);
        return new KafkaConsumer<>(config);
    }

    private KafkaConsumer<String, String> groupConsumer(String group, String protocol, String isolation) {
        return consumer(Map.of(
                ConsumerConfig.GROUP_ID_CONFIG, group,
                ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation));
    }

    /** Polls until ``count`` records arrived (or the wait is over); returns them. */
    private static List<ConsumerRecord<String, String>> pollFor(KafkaConsumer<String, String> consumer, int count) {
        return pollFor(consumer, count, WAIT);
    }

    private static List<ConsumerRecord<String, String>> pollFor(KafkaConsumer<String, String> consumer, int count,
                                                                Duration wait) {
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        long deadline = System.nanoTime() + wait.toNanos();
        while (records.size() < count && System.nanoTime() < deadline) {
            ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
            batch.forEach(records::add);
        }
        return records;
    }

    private static List<String> values(List<ConsumerRecord<String, String>> records) {
        return records.stream().map(ConsumerRecord::value).sorted().collect(Collectors.toList());
    }

    private static List<TopicPartition> partitions(String topic, int count) {
        List<TopicPartition> out = new ArrayList<>();
        for (int p = 0; p < count; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    private static Map<String, Long> offsetsByPartition(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<String, Long> out = new TreeMap<>();
        offsets.forEach((tp, om) -> out.put(tp.toString(), om == null ? null : om.offset()));
        return out;
    }

    /** The group's committed offsets; stable ones (KIP-447): a transaction's wait for its markers. */
    private Map<String, Long> committed(String group) throws Exception {
        return offsetsByPartition(get(admin.listConsumerGroupOffsets(group,
                new ListConsumerGroupOffsetsOptions().requireStable(true)).partitionsToOffsetAndMetadata()));
    }

    private static Map<String, Long> expectedOffsets(String topic, long offset) {
        Map<String, Long> out = new TreeMap<>();
        for (TopicPartition tp : partitions(topic, PARTITIONS)) {
            out.put(tp.toString(), offset);
        }
        return out;
    }

    private Config describeConfig(ConfigResource resource) throws Exception {
        DescribeConfigsOptions options = new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true);
        return get(admin.describeConfigs(List.of(resource), options).values().get(resource));
    }

    /** The described configs once ``entry`` has ``value`` (an altered config reaches the brokers after). */
    private Config describeConfigOnce(ConfigResource resource, String entry, String value) throws Exception {
        return eventually(() -> describeConfig(resource),
                (Config c) -> c.get(entry) != null && value.equals(c.get(entry).value()));
    }

    // ---------------------------------------------------------------- the plain suite

    private void plain() {
        List<Integer> brokerIds = new ArrayList<>();
        check("admin.describeCluster", () -> {
            DescribeClusterResult cluster = admin.describeCluster();
            String clusterId = get(cluster.clusterId());
            Collection<Node> nodes = get(cluster.nodes());
            Node controller = get(cluster.controller());
            nodes.forEach(n -> brokerIds.add(n.id()));
            expect(clusterId != null && clusterId.length() == 22, "a 22-character cluster id", clusterId);
            expect(nodes.size() == brokers, brokers + " brokers", nodes);
            expect(controller != null && brokerIds.contains(controller.id()), "a live broker as controller", controller);
            return Map.of("clusterId", clusterId, "brokers", brokerIds, "controller", controller.id());
        });
        check("admin.describeCluster(authorizedOperations)", () -> {
            Set<AclOperation> ops = get(admin.describeCluster(new DescribeClusterOptions()
                    .includeAuthorizedOperations(true)).authorizedOperations());
            expect(CLUSTER_OPERATIONS.equals(ops), "every cluster operation (no authorizer)", ops);
            return String.valueOf(ops);
        });
        check("admin.describeFeatures", () -> {
            FeatureMetadata features = get(admin.describeFeatures().featureMetadata());
            expect(features.finalizedFeatures().containsKey("metadata.version"), "metadata.version finalized",
                    features);
            return features.toString();
        });
        Map<String, Uuid> topicIds = new HashMap<>();
        check("admin.createTopics", () -> {
            List<NewTopic> topics = List.of(
                    new NewTopic(ORDERS, PARTITIONS, replicationFactor).configs(Map.of("retention.ms", "3600000")),
                    new NewTopic(OUT, PARTITIONS, replicationFactor),
                    new NewTopic(SCRATCH, 1, replicationFactor));
            get(admin.createTopics(topics, new CreateTopicsOptions().validateOnly(true)).all());
            CreateTopicsResult result = admin.createTopics(topics);
            get(result.all());
            for (NewTopic topic : topics) {
                topicIds.put(topic.name(), get(result.topicId(topic.name())));
                expect(get(result.numPartitions(topic.name())) == topic.numPartitions(), "partitions", topic);
                expect(get(result.replicationFactor(topic.name())) == replicationFactor, "replication factor", topic);
            }
            String retention = get(result.config(ORDERS)).get("retention.ms").value();
            expect(retention.equals("3600000"), "retention.ms in the result's configs", retention);
            String exists = expectFailure(admin.createTopics(List.of(new NewTopic(SCRATCH, 1, replicationFactor)))
                    .all(), TopicExistsException.class);
            return Map.of("topicIds", topicIds.toString(), "again", exists);
        });
        check("admin.listTopics", () -> {
            Set<String> names = get(admin.listTopics().names());
            expect(names.containsAll(List.of(ORDERS, OUT, SCRATCH)), "the three topics", names);
            Set<String> internal = get(admin.listTopics(new ListTopicsOptions().listInternal(true)).names());
            return Map.of("names", new ArrayList<>(names), "withInternal", new ArrayList<>(internal));
        });
        check("admin.describeTopics", () -> {
            Map<String, TopicDescription> byName = get(admin.describeTopics(List.of(ORDERS, OUT),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames());
            TopicDescription orders = byName.get(ORDERS);
            expect(orders.partitions().size() == PARTITIONS, "3 partitions", orders);
            expect(orders.topicId().equals(topicIds.get(ORDERS)), "the created topic id", orders.topicId());
            for (TopicPartitionInfo info : orders.partitions()) {
                expect(info.leader() != null && info.replicas().size() == replicationFactor
                        && info.isr().size() == replicationFactor, "a leader, all replicas in the ISR", info);
            }
            expect(TOPIC_OPERATIONS.equals(orders.authorizedOperations()), "every topic operation (no authorizer)",
                    orders.authorizedOperations());
            Map<Uuid, TopicDescription> byId = get(admin.describeTopics(
                    TopicCollection.ofTopicIds(List.of(topicIds.get(OUT)))).allTopicIds());
            expect(byId.get(topicIds.get(OUT)).name().equals(OUT), "described by id", byId);
            String unknown = expectFailure(admin.describeTopics(List.of("java-no-such-topic")).allTopicNames(),
                    UnknownTopicOrPartitionException.class);
            return Map.of("orders", orders.toString(), "unknown", unknown);
        });
        check("admin.createPartitions", () -> {
            get(admin.createPartitions(Map.of(SCRATCH, NewPartitions.increaseTo(3))).all());
            long deadline = System.nanoTime() + WAIT.toNanos();
            int count;
            do {
                count = get(admin.describeTopics(List.of(SCRATCH)).allTopicNames()).get(SCRATCH).partitions().size();
            } while (count != 3 && System.nanoTime() < deadline);
            expect(count == 3, "3 partitions after createPartitions", count);
            return Map.of("partitions", count);
        });
        ConfigResource ordersResource = new ConfigResource(ConfigResource.Type.TOPIC, ORDERS);
        check("admin.describeConfigs(topic)", () -> {
            Config config = describeConfig(ordersResource);
            ConfigEntry retention = config.get("retention.ms");
            ConfigEntry segment = config.get("segment.bytes");
            expect(retention.value().equals("3600000")
                    && retention.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "retention.ms set", retention);
            expect(segment != null && segment.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    "segment.bytes not set on the topic", segment);
            return Map.of("entries", config.entries().size(), "retention.ms", retention.toString());
        });
        check("admin.incrementalAlterConfigs(topic)", () -> {
            Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(ordersResource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND)));
            get(admin.incrementalAlterConfigs(ops, new AlterConfigsOptions().validateOnly(true)).all());
            expect(describeConfig(ordersResource).get("retention.ms").value().equals("3600000"),
                    "validateOnly changes nothing", describeConfig(ordersResource).get("retention.ms"));
            get(admin.incrementalAlterConfigs(ops).all());
            Config altered = describeConfigOnce(ordersResource, "retention.ms", "7200000");
            expect(altered.get("retention.ms").value().equals("7200000"), "retention.ms=7200000",
                    altered.get("retention.ms"));
            expect(altered.get("cleanup.policy").value().equals("delete,compact"), "cleanup.policy appended",
                    altered.get("cleanup.policy"));
            get(admin.incrementalAlterConfigs(Map.of(ordersResource, List.of(
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE)))).all());
            ConfigEntry policy = describeConfigOnce(ordersResource, "cleanup.policy", "delete").get("cleanup.policy");
            expect(policy.value().equals("delete") && policy.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG,
                    "cleanup.policy back to its default", policy);
            String bad = expectFailure(admin.incrementalAlterConfigs(Map.of(ordersResource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all(),
                    InvalidConfigurationException.class);
            return Map.of("bad value", bad);
        });
        check("admin.describeConfigs(broker)", () -> {
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(brokerIds.get(0)));
            Config config = describeConfig(broker);
            ConfigEntry retention = config.get("log.retention.ms");
            expect(config.entries().size() > 0, "broker configs", config);
            return Map.of("entries", config.entries().size(), "log.retention.ms", String.valueOf(retention));
        });
        check("admin.incrementalAlterConfigs(broker)", () -> {
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(brokerIds.get(0)));
            ConfigResource defaults = new ConfigResource(ConfigResource.Type.BROKER, "");
            get(admin.incrementalAlterConfigs(Map.of(
                    broker, List.of(new AlterConfigOp(new ConfigEntry("log.retention.ms", "86400000"),
                            AlterConfigOp.OpType.SET)),
                    defaults, List.of(new AlterConfigOp(new ConfigEntry("log.retention.bytes", "1073741824"),
                            AlterConfigOp.OpType.SET)))).all());
            Config config = eventually(() -> describeConfig(broker), (Config c) -> c.get("log.retention.bytes") != null
                    && "1073741824".equals(c.get("log.retention.bytes").value())
                    && "86400000".equals(c.get("log.retention.ms").value()));
            ConfigEntry retention = config.get("log.retention.ms");
            ConfigEntry bytes = config.get("log.retention.bytes");
            expect(retention != null && retention.value().equals("86400000")
                    && retention.source() == ConfigEntry.ConfigSource.DYNAMIC_BROKER_CONFIG,
                    "log.retention.ms for this broker", retention);
            expect(bytes != null && bytes.value().equals("1073741824")
                    && bytes.source() == ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                    "log.retention.bytes for all brokers", bytes);
            ConfigEntry topicRetention = describeConfig(new ConfigResource(ConfigResource.Type.TOPIC, OUT))
                    .get("retention.ms");
            get(admin.incrementalAlterConfigs(Map.of(
                    broker, List.of(new AlterConfigOp(new ConfigEntry("log.retention.ms", ""),
                            AlterConfigOp.OpType.DELETE)),
                    defaults, List.of(new AlterConfigOp(new ConfigEntry("log.retention.bytes", ""),
                            AlterConfigOp.OpType.DELETE)))).all());
            String refused = expectFailure(admin.incrementalAlterConfigs(Map.of(broker, List.of(
                    new AlterConfigOp(new ConfigEntry("num.partitions", "7"), AlterConfigOp.OpType.SET)))).all(),
                    org.apache.kafka.common.errors.InvalidRequestException.class);
            return Map.of("topic retention.ms inherits", topicRetention.toString(), "refused", refused);
        });

        Map<TopicPartition, Long> produced = new HashMap<>();
        long baseTimestamp = 1_700_000_000_000L;
        check("producer.idempotent", () -> {
            try (KafkaProducer<String, String> producer = producer(Map.of(
                    ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true, ProducerConfig.LINGER_MS_CONFIG, 5))) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < PER_PARTITION; i++) {
                    for (int p = 0; p < PARTITIONS; p++) {
                        sent.add(producer.send(new ProducerRecord<>(ORDERS, p, baseTimestamp + i * 1000L,
                                "k" + i, "order-" + p + "-" + i)));
                    }
                }
                producer.flush();
                for (Future<RecordMetadata> future : sent) {
                    RecordMetadata md = get(future);
                    produced.merge(new TopicPartition(md.topic(), md.partition()), md.offset(), Math::max);
                }
            }
            for (long last : produced.values()) {
                expect(last == PER_PARTITION - 1, "offsets 0..9 in each partition", produced);
            }
            return produced.toString();
        });
        check("producer.compression", () -> {
            // Batches as the Java client compresses them, stored and served back as they are
            TopicPartition tp = new TopicPartition(SCRATCH, 1);
            List<String> codecs = List.of("gzip", "snappy", "lz4", "zstd");
            for (String codec : codecs) {
                try (KafkaProducer<String, String> producer = producer(Map.of(
                        ProducerConfig.COMPRESSION_TYPE_CONFIG, codec, ProducerConfig.LINGER_MS_CONFIG, 20))) {
                    for (int i = 0; i < 5; i++) {
                        ProducerRecord<String, String> record = new ProducerRecord<>(SCRATCH, 1, "k" + i,
                                codec + "-" + i + "-" + "x".repeat(200));
                        record.headers().add("codec", codec.getBytes(java.nio.charset.StandardCharsets.UTF_8));
                        producer.send(record);
                    }
                    producer.flush();
                }
            }
            try (KafkaConsumer<String, String> consumer = consumer(Map.of())) {
                consumer.assign(List.of(tp));
                consumer.seekToBeginning(List.of(tp));
                List<ConsumerRecord<String, String>> records = pollFor(consumer, codecs.size() * 5);
                Map<String, Integer> perCodec = new TreeMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    String codec = new String(r.headers().lastHeader("codec").value(),
                            java.nio.charset.StandardCharsets.UTF_8);
                    expect(r.value().startsWith(codec + "-"), "the value its codec wrote", r);
                    perCodec.merge(codec, 1, Integer::sum);
                }
                expect(perCodec.equals(Map.of("gzip", 5, "snappy", 5, "lz4", 5, "zstd", 5)), "5 records per codec",
                        perCodec);
                return perCodec;
            }
        });
        check("admin.listOffsets", () -> {
            TopicPartition tp = new TopicPartition(ORDERS, 1);
            Map<String, Long> got = new LinkedHashMap<>();
            Map<String, OffsetSpec> specs = Map.of(
                    "earliest", OffsetSpec.earliest(), "latest", OffsetSpec.latest(),
                    "forTimestamp", OffsetSpec.forTimestamp(baseTimestamp + 4500),
                    "maxTimestamp", OffsetSpec.maxTimestamp());
            for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
                ListOffsetsResult.ListOffsetsResultInfo info = get(admin.listOffsets(Map.of(tp, spec.getValue()))
                        .partitionResult(tp));
                got.put(spec.getKey(), info.offset());
            }
            expect(got.equals(Map.of("earliest", 0L, "latest", 10L, "forTimestamp", 5L, "maxTimestamp", 9L)),
                    "earliest 0, latest 10, the first at or after timestamp 4.5 s is 5, max timestamp at 9", got);
            return got;
        });
        check("admin.describeProducers", () -> {
            TopicPartition tp = new TopicPartition(ORDERS, 0);
            List<ProducerState> states = get(admin.describeProducers(List.of(tp)).partitionResult(tp))
                    .activeProducers();
            expect(states.size() == 1 && states.get(0).lastSequence() == PER_PARTITION - 1,
                    "one producer whose last sequence is 9", states);
            return states.toString();
        });

        KafkaConsumer<String, String> classic = groupConsumer("java-classic", "classic", "read_committed");
        KafkaConsumer<String, String> modern = groupConsumer("java-consumer", "consumer", "read_committed");
        Map<String, KafkaConsumer<String, String>> consumers = new LinkedHashMap<>();
        consumers.put("consumer.classic", classic);
        consumers.put("consumer.groupProtocolConsumer", modern);
        for (Map.Entry<String, KafkaConsumer<String, String>> e : consumers.entrySet()) {
            check(e.getKey(), () -> {
                KafkaConsumer<String, String> consumer = e.getValue();
                consumer.subscribe(List.of(ORDERS));
                List<ConsumerRecord<String, String>> records = pollFor(consumer, PARTITIONS * PER_PARTITION);
                expect(records.size() == PARTITIONS * PER_PARTITION, "30 records", records.size());
                consumer.commitSync(WAIT);
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(
                        new HashSet<>(partitions(ORDERS, PARTITIONS)), WAIT);
                expect(offsetsByPartition(committed).equals(expectedOffsets(ORDERS, PER_PARTITION)),
                        "committed 10 in each partition", committed);
                return Map.of("assignment", consumer.assignment().toString(), "group",
                        consumer.groupMetadata().toString());
            });
        }
        check("consumer.groupProtocolConsumer(regex)", () -> {
            // KIP-848's broker-side regular expression (RE2J in Kafka)
            try (KafkaConsumer<String, String> consumer = groupConsumer("java-regex", "consumer", "read_committed")) {
                consumer.subscribe(new SubscriptionPattern("java-ord.*"));
                List<ConsumerRecord<String, String>> records = pollFor(consumer, PARTITIONS * PER_PARTITION);
                expect(records.size() == PARTITIONS * PER_PARTITION, "30 records", records.size());
                Set<String> topics = records.stream().map(ConsumerRecord::topic).collect(Collectors.toSet());
                expect(topics.equals(Set.of(ORDERS)), "only " + ORDERS, topics);
                return consumer.assignment().toString();
            }
        });
        check("admin.listGroups", () -> {
            Map<String, GroupListing> groups = get(admin.listGroups().all()).stream()
                    .collect(Collectors.toMap(GroupListing::groupId, g -> g));
            GroupListing c = groups.get("java-classic");
            GroupListing m = groups.get("java-consumer");
            expect(c != null && c.type().equals(java.util.Optional.of(GroupType.CLASSIC))
                    && c.groupState().equals(java.util.Optional.of(GroupState.STABLE)), "java-classic, classic, stable", c);
            expect(m != null && m.type().equals(java.util.Optional.of(GroupType.CONSUMER))
                    && m.groupState().equals(java.util.Optional.of(GroupState.STABLE)), "java-consumer, consumer, stable", m);
            return groups.values().stream().map(Object::toString).collect(Collectors.toList());
        });
        check("admin.listConsumerGroups", () -> {
            @SuppressWarnings("removal")  // listGroups is its successor; still served, so still checked
            Set<String> listed = get(admin.listConsumerGroups().all()).stream()
                    .map(org.apache.kafka.clients.admin.ConsumerGroupListing::groupId).collect(Collectors.toSet());
            Set<String> consumerGroups = get(admin.listGroups(ListGroupsOptions.forConsumerGroups()).all()).stream()
                    .map(GroupListing::groupId).collect(Collectors.toSet());
            expect(listed.containsAll(List.of("java-classic", "java-consumer")) && listed.equals(consumerGroups),
                    "both groups, both ways", listed + " " + consumerGroups);
            return new ArrayList<>(listed);
        });
        check("admin.describeConsumerGroups", () -> {
            Map<String, ConsumerGroupDescription> groups = get(admin.describeConsumerGroups(
                    List.of("java-classic", "java-consumer")).all());
            for (ConsumerGroupDescription group : groups.values()) {
                expect(group.groupState() == GroupState.STABLE && group.members().size() == 1
                        && group.members().iterator().next().assignment().topicPartitions().size() == PARTITIONS,
                        "stable, one member owning the 3 partitions", group);
            }
            expect(groups.get("java-classic").type() == GroupType.CLASSIC
                    && groups.get("java-consumer").type() == GroupType.CONSUMER, "the groups' types", groups);
            return groups.values().stream().map(Object::toString).collect(Collectors.toList());
        });
        check("admin.describeClassicGroups", () -> {
            ClassicGroupDescription group = get(admin.describeClassicGroups(List.of("java-classic"))
                    .describedGroups().get("java-classic"));
            expect(group.protocol().equals("consumer") && group.members().size() == 1, "one consumer member",
                    group);
            return group.toString();
        });
        check("admin.describeConsumerGroups(authorizedOperations)", () -> {
            Map<String, Set<AclOperation>> ops = new TreeMap<>();
            get(admin.describeConsumerGroups(List.of("java-classic", "java-consumer"),
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).all())
                    .forEach((name, group) -> ops.put(name, group.authorizedOperations()));
            for (Set<AclOperation> groupOps : ops.values()) {
                expect(GROUP_OPERATIONS.equals(groupOps), "every group operation (no authorizer)", ops);
            }
            return ops.toString();
        });
        check("admin.deleteConsumerGroups(not empty)", () -> expectFailure(
                admin.deleteConsumerGroups(List.of("java-classic")).all(), GroupNotEmptyException.class));
        classic.close(CloseOptions.timeout(WAIT));
        modern.close(CloseOptions.timeout(WAIT));
        check("admin.listConsumerGroupOffsets", () -> {
            Map<String, Long> c = committed("java-classic");
            Map<String, Long> m = committed("java-consumer");
            expect(c.equals(expectedOffsets(ORDERS, PER_PARTITION)) && m.equals(c), "10 in each partition", c + " " + m);
            ConsumerGroupDescription empty = get(admin.describeConsumerGroups(List.of("java-classic")).all())
                    .get("java-classic");
            expect(empty.groupState() == GroupState.EMPTY, "empty once its member left", empty);
            return Map.of("java-classic", c, "java-consumer", m);
        });
        check("admin.alterConsumerGroupOffsets", () -> {
            get(admin.alterConsumerGroupOffsets("java-classic",
                    Map.of(new TopicPartition(ORDERS, 0), new OffsetAndMetadata(5, "rewound"))).all());
            Map<TopicPartition, OffsetAndMetadata> offsets = get(admin.listConsumerGroupOffsets("java-classic")
                    .partitionsToOffsetAndMetadata());
            OffsetAndMetadata p0 = offsets.get(new TopicPartition(ORDERS, 0));
            expect(p0.offset() == 5 && p0.metadata().equals("rewound"), "offset 5 with its metadata", p0);
            return offsetsByPartition(offsets);
        });
        check("admin.deleteConsumerGroupOffsets", () -> {
            get(admin.deleteConsumerGroupOffsets("java-classic", Set.of(new TopicPartition(ORDERS, 1))).all());
            Map<String, Long> offsets = committed("java-classic");
            expect(!offsets.containsKey(ORDERS + "-1") && offsets.containsKey(ORDERS + "-2"), "partition 1's gone",
                    offsets);
            return offsets;
        });
        check("admin.removeMembersFromConsumerGroup", () -> {
            // A static member (group.instance.id) does not leave the group when it closes.
            try (KafkaConsumer<String, String> consumer = consumer(Map.of(
                    ConsumerConfig.GROUP_ID_CONFIG, "java-static",
                    ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic",
                    ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "java-static-1"))) {
                consumer.subscribe(List.of(ORDERS));
                pollFor(consumer, PARTITIONS * PER_PARTITION);
            }
            ConsumerGroupDescription before = get(admin.describeConsumerGroups(List.of("java-static")).all())
                    .get("java-static");
            expect(before.members().size() == 1, "the static member stays after close", before);
            get(admin.removeMembersFromConsumerGroup("java-static", new RemoveMembersFromConsumerGroupOptions(
                    List.of(new MemberToRemove("java-static-1")))).all());
            ConsumerGroupDescription after = get(admin.describeConsumerGroups(List.of("java-static")).all())
                    .get("java-static");
            expect(after.members().isEmpty() && after.groupState() == GroupState.EMPTY, "removed", after);
            get(admin.deleteConsumerGroups(List.of("java-static")).all());
            return after.toString();
        });
        check("admin.deleteConsumerGroups", () -> {
            get(admin.deleteConsumerGroups(List.of("java-classic", "java-consumer")).all());
            Set<String> left = get(admin.listGroups().all()).stream().map(GroupListing::groupId)
                    .collect(Collectors.toSet());
            expect(!left.contains("java-classic") && !left.contains("java-consumer"), "both groups gone", left);
            String unknown = expectFailure(admin.deleteConsumerGroups(List.of("java-no-such-group")).all(),
                    GroupIdNotFoundException.class);
            return Map.of("groups left", new ArrayList<>(left), "unknown", unknown);
        });

        transactions();
        hangingTransaction();

        check("admin.deleteRecords", () -> {
            TopicPartition tp = new TopicPartition(ORDERS, 2);
            long low = get(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp))
                    .lowWatermark();
            long earliest = get(admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp)).offset();
            expect(low == 4 && earliest == 4, "low watermark and earliest offset 4", low + " " + earliest);
            return Map.of("lowWatermark", low);
        });
        check("admin.electLeaders", () -> {
            TopicPartition tp = new TopicPartition(ORDERS, 0);
            Map<TopicPartition, java.util.Optional<Throwable>> result = get(admin.electLeaders(ElectionType.PREFERRED,
                    Set.of(tp)).partitions());
            Throwable error = result.get(tp).orElse(null);
            expect(error instanceof ElectionNotNeededException, "the preferred leader already leads", result);
            Map<TopicPartition, java.util.Optional<Throwable>> all = get(admin.electLeaders(ElectionType.PREFERRED,
                    null).partitions());
            expect(all.values().stream().noneMatch(java.util.Optional::isPresent),
                    "no errors electing every partition", all);
            return Map.of("one", result.toString(), "all", all.size());
        });
        check("admin.describeLogDirs", () -> {
            Map<Integer, Map<String, LogDirDescription>> dirs = get(admin.describeLogDirs(brokerIds).allDescriptions());
            long replicas = 0;
            long bytes = 0;
            for (Map<String, LogDirDescription> perBroker : dirs.values()) {
                for (LogDirDescription dir : perBroker.values()) {
                    expect(dir.error() == null, "an online dir", dir);
                    for (Map.Entry<TopicPartition, ReplicaInfo> e : dir.replicaInfos().entrySet()) {
                        if (e.getKey().topic().equals(ORDERS)) {
                            replicas++;
                            bytes += e.getValue().size();
                        }
                    }
                }
            }
            expect(dirs.keySet().equals(new HashSet<>(brokerIds)), "every broker answers", dirs.keySet());
            TopicPartitionInfo p0 = get(admin.describeTopics(List.of(ORDERS)).allTopicNames()).get(ORDERS)
                    .partitions().get(0);
            TopicPartitionReplica replica = new TopicPartitionReplica(ORDERS, 0, p0.leader().id());
            DescribeReplicaLogDirsResult.ReplicaLogDirInfo info = get(admin.describeReplicaLogDirs(List.of(replica))
                    .all()).get(replica);
            expect(info.getCurrentReplicaLogDir() != null, "the leader's replica has a log dir", info);
            expect(replicas == (long) PARTITIONS * replicationFactor && bytes > 0,
                    "every replica of " + ORDERS + ", with bytes", replicas + " replicas, " + bytes + " bytes");
            return Map.of("replicas", replicas, "bytes", bytes);
        });
        check("admin.describeUserScramCredentials/alterUserScramCredentials", () -> {
            List<UserScramCredentialAlteration> upsert = List.of(new UserScramCredentialUpsertion("java-user",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "java-secret"));
            get(admin.alterUserScramCredentials(upsert).all());
            UserScramCredentialsDescription described = eventually(
                    () -> get(admin.describeUserScramCredentials(List.of("java-user")).description("java-user")),
                    (UserScramCredentialsDescription u) -> !u.credentialInfos().isEmpty());
            expect(described.credentialInfos().equals(List.of(
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192))), "SCRAM-SHA-256, 8192", described);
            get(admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialDeletion("java-user", ScramMechanism.SCRAM_SHA_256))).all());
            List<String> users = eventually(() -> get(admin.describeUserScramCredentials().users()),
                    (List<String> u) -> !u.contains("java-user"));
            expect(!users.contains("java-user"), "deleted", users);
            return described.toString();
        });
        check("admin.describeAcls(no authorizer)", () -> expectFailure(
                admin.describeAcls(AclBindingFilter.ANY).values(), SecurityDisabledException.class));
        check("admin.deleteTopics", () -> {
            get(admin.deleteTopics(List.of(SCRATCH)).all());
            long deadline = System.nanoTime() + WAIT.toNanos();
            Set<String> names;
            do {
                names = get(admin.listTopics().names());
            } while (names.contains(SCRATCH) && System.nanoTime() < deadline);
            expect(!names.contains(SCRATCH), SCRATCH + " gone", names);
            String unknown = expectFailure(admin.deleteTopics(List.of("java-no-such-topic")).all(),
                    UnknownTopicOrPartitionException.class);
            return Map.of("unknown", unknown);
        });
    }

    /** A consume-transform-produce loop: offsets in the transaction, one committed and one aborted. */
    private void transactions() {
        String txnId = "java-txn-1";
        KafkaProducer<String, String> producer = producer(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId));
        KafkaConsumer<String, String> input = groupConsumer("java-eos", "consumer", "read_committed");
        check("producer.transactional.commit", () -> {
            producer.initTransactions();
            input.subscribe(List.of(ORDERS));
            List<ConsumerRecord<String, String>> records = pollFor(input, PARTITIONS * PER_PARTITION);
            expect(records.size() == PARTITIONS * PER_PARTITION, "30 records in", records.size());
            producer.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<String, String> record : records) {
                producer.send(new ProducerRecord<>(OUT, record.partition(), record.key(), "done-" + record.value()));
                offsets.merge(new TopicPartition(record.topic(), record.partition()),
                        new OffsetAndMetadata(record.offset() + 1), (a, b) -> a.offset() > b.offset() ? a : b);
            }
            producer.sendOffsetsToTransaction(offsets, input.groupMetadata());
            producer.flush();
            check("admin.describeTransactions(ongoing)", () -> {
                TransactionDescription d = get(admin.describeTransactions(List.of(txnId)).description(txnId));
                // AddOffsetsToTxn adds the group's __consumer_offsets partition, as in Kafka
                expect(d.state() == TransactionState.ONGOING && d.topicPartitions().size() == PARTITIONS + 1
                        && d.topicPartitions().stream().filter(tp -> tp.topic().equals(OUT)).count() == PARTITIONS,
                        "ongoing over the 3 output partitions and one of __consumer_offsets", d);
                return d.toString();
            });
            check("admin.listTransactions", () -> {
                Collection<TransactionListing> ongoing = get(admin.listTransactions(new ListTransactionsOptions()
                        .filterStates(List.of(TransactionState.ONGOING))).all());
                expect(ongoing.stream().anyMatch(t -> t.transactionalId().equals(txnId)), txnId + " listed", ongoing);
                return ongoing.toString();
            });
            check("admin.describeProducers(in a transaction)", () -> {
                TopicPartition tp = new TopicPartition(OUT, 0);
                List<ProducerState> states = get(admin.describeProducers(List.of(tp)).partitionResult(tp))
                        .activeProducers();
                expect(states.size() == 1 && states.get(0).currentTransactionStartOffset().orElse(-1) == 0,
                        "the transaction starts at offset 0", states);
                return states.toString();
            });
            producer.commitTransaction();
            // The Java Admin skips partitions answered UNSTABLE_OFFSET_COMMIT while the markers are on their way
            Map<String, Long> committed = eventually(() -> committed("java-eos"),
                    (Map<String, Long> c) -> c.equals(expectedOffsets(ORDERS, PER_PARTITION)));
            expect(committed.equals(expectedOffsets(ORDERS, PER_PARTITION)), "the group's offsets committed",
                    committed);
            return committed;
        });
        check("producer.transactional.abort", () -> {
            producer.beginTransaction();
            for (int p = 0; p < PARTITIONS; p++) {
                producer.send(new ProducerRecord<>(OUT, p, "aborted", "aborted-" + p));
            }
            producer.flush();
            producer.abortTransaction();
            // EndTxn is answered once PrepareAbort is written; the markers follow (Kafka's coordinator too)
            TransactionDescription d = eventually(
                    () -> get(admin.describeTransactions(List.of(txnId)).description(txnId)),
                    (TransactionDescription t) -> t.state() == TransactionState.COMPLETE_ABORT);
            expect(d.state() == TransactionState.COMPLETE_ABORT, "aborted", d);
            return d.toString();
        });
        input.close(CloseOptions.timeout(WAIT));
        check("consumer.readCommitted", () -> {
            Map<String, List<String>> seen = new TreeMap<>();
            for (String isolation : List.of("read_committed", "read_uncommitted")) {
                try (KafkaConsumer<String, String> consumer = consumer(Map.of(
                        ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
                    consumer.assign(partitions(OUT, PARTITIONS));
                    consumer.seekToBeginning(partitions(OUT, PARTITIONS));
                    int want = PARTITIONS * PER_PARTITION + (isolation.equals("read_committed") ? 0 : PARTITIONS);
                    List<ConsumerRecord<String, String>> records = pollFor(consumer, want);
                    records.addAll(pollFor(consumer, 1, Duration.ofMillis(500)));  // and nothing more
                    seen.put(isolation, values(records));
                    expect(records.size() == want, want + " records " + isolation, records.size());
                }
            }
            expect(seen.get("read_committed").stream().noneMatch(v -> v.startsWith("aborted")), "no aborted record",
                    seen.get("read_committed"));
            return Map.of("read_committed", seen.get("read_committed").size(),
                    "read_uncommitted", seen.get("read_uncommitted").size());
        });
        check("admin.fenceProducers", () -> {
            get(admin.fenceProducers(List.of(txnId)).all());
            try {
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(OUT, 0, "fenced", "fenced"));
                producer.commitTransaction();
                throw new AssertionError("the fenced producer committed");
            } catch (ProducerFencedException e) {
                return e.toString();
            } catch (org.apache.kafka.common.KafkaException e) {
                expect(e.getCause() instanceof ProducerFencedException
                        || e instanceof org.apache.kafka.common.errors.InvalidProducerEpochException,
                        "fenced", e);
                return e.toString();
            }
        });
        producer.close(Duration.ZERO);
    }

    /** kafka-transactions.sh's abort: the Admin writes the ABORT marker to the partition leader itself. */
    private void hangingTransaction() {
        check("admin.abortTransaction", () -> {
            TopicPartition tp = new TopicPartition(OUT, 1);
            KafkaProducer<String, String> hanging = producer(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG,
                    "java-hanging"));
            try {
                hanging.initTransactions();
                hanging.beginTransaction();
                get(hanging.send(new ProducerRecord<>(OUT, 1, "hanging", "hanging")));
                ProducerState open = get(admin.describeProducers(List.of(tp)).partitionResult(tp)).activeProducers()
                        .stream().filter(p -> p.currentTransactionStartOffset().isPresent()).findFirst()
                        .orElseThrow(() -> new AssertionError("no open transaction in " + tp));
                get(admin.abortTransaction(new AbortTransactionSpec(tp, open.producerId(),
                        (short) open.producerEpoch(), open.coordinatorEpoch().orElse(0))).all());
                List<ProducerState> after = get(admin.describeProducers(List.of(tp)).partitionResult(tp))
                        .activeProducers();
                expect(after.stream().noneMatch(p -> p.currentTransactionStartOffset().isPresent()),
                        "no open transaction left", after);
                long stable = get(admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
                        new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(tp)).offset();
                long end = get(admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp)).offset();
                expect(stable == end, "the last stable offset at the log end", stable + " " + end);
                return Map.of("aborted", open.toString(), "lastStableOffset", stable);
            } finally {
                hanging.close(Duration.ofSeconds(5));
            }
        });
    }

    // ---------------------------------------------------------------- the secured suite

    /** As a super user (the SASL properties given): ACLs that let "alice" in and out again. */
    private void secured() {
        String topic = "java-secure";
        AclBinding write = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "java-", PatternType.PREFIXED),
                new AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW));
        AclBinding describe = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "java-", PatternType.PREFIXED),
                new AccessControlEntry("User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW));
        AclBindingFilter alices = new AclBindingFilter(ResourcePatternFilter.ANY,
                new AccessControlEntryFilter("User:alice", null, AclOperation.ANY, AclPermissionType.ANY));
        Map<String, Object> alice = Map.of("sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" "
                        + "password=\"alice-secret\";",
                ProducerConfig.MAX_BLOCK_MS_CONFIG, 5000);
        check("admin.createTopics(secured)", () -> {
            get(admin.createTopics(List.of(new NewTopic(topic, 1, replicationFactor))).all());
            return topic;
        });
        check("producer.denied", () -> aliceProduces(alice, topic, false));
        check("admin.createAcls", () -> {
            get(admin.createAcls(List.of(write, describe)).all());
            return List.of(write.toString(), describe.toString());
        });
        check("admin.describeAcls", () -> {
            Collection<AclBinding> found = get(admin.describeAcls(alices).values());
            expect(new HashSet<>(found).equals(Set.of(write, describe)), "alice's two ACLs", found);
            Collection<AclBinding> prefixed = get(admin.describeAcls(new AclBindingFilter(new ResourcePatternFilter(
                    ResourceType.TOPIC, "java-secure", PatternType.MATCH), AccessControlEntryFilter.ANY)).values());
            expect(prefixed.size() == 2, "both match java-secure", prefixed);
            return found.stream().map(Object::toString).collect(Collectors.toList());
        });
        check("producer.allowed", () -> aliceProduces(alice, topic, true));
        check("admin.deleteAcls", () -> {
            Collection<AclBinding> deleted = get(admin.deleteAcls(List.of(alices)).all());
            expect(deleted.size() == 2, "two deleted", deleted);
            Collection<AclBinding> left = get(admin.describeAcls(alices).values());
            expect(left.isEmpty(), "none left", left);
            return deleted.stream().map(Object::toString).collect(Collectors.toList());
        });
        check("producer.deniedAgain", () -> aliceProduces(alice, topic, false));
        check("admin.createTopics(no DescribeConfigs)", () -> {
            AclBinding create = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "java-alice-",
                    PatternType.PREFIXED), new AccessControlEntry("User:alice", "*", AclOperation.CREATE,
                    AclPermissionType.ALLOW));
            get(admin.createAcls(List.of(create)).all());
            Map<String, Object> config = config();
            config.putAll(alice);
            config.remove(ProducerConfig.MAX_BLOCK_MS_CONFIG);
            try (Admin asAlice = Admin.create(config)) {
                CreateTopicsResult created = asAlice.createTopics(List.of(new NewTopic("java-alice-t", 1,
                        replicationFactor)));
                get(created.all());
                // Kafka's ControllerApis: the configs only for a principal that may DESCRIBE_CONFIGS the topic
                return expectFailure(created.config("java-alice-t"), TopicAuthorizationException.class);
            } finally {
                get(admin.deleteAcls(List.of(create.toFilter())).all());
            }
        });
    }

    private Object aliceProduces(Map<String, Object> alice, String topic, boolean allowed) throws Exception {
        try (KafkaProducer<String, String> producer = producer(alice)) {
            Future<RecordMetadata> sent = producer.send(new ProducerRecord<>(topic, "k", "v"));
            if (allowed) {
                return get(sent).toString();
            }
            try {
                Object value = get(sent);
                throw new AssertionError("alice wrote without an ACL: " + value);
            } catch (ExecutionException e) {
                expect(e.getCause() instanceof TopicAuthorizationException, "TopicAuthorizationException", e.getCause());
                return e.getCause().toString();
            }
        } catch (TopicAuthorizationException e) {
            expect(!allowed, "allowed", e);
            return e.toString();
        }
    }
}
