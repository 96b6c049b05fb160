package io.strata.interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import io.strata.interop.Summary.Failed;
import io.strata.interop.Summary.Produced;

/**
 * Interop client for the Java runtime; prints one JSON summary on stdout in the format
 * shared by every interop client (see interop/README.md). Modes:
 *
 * <ul>
 *   <li>{@code both} (default), {@code produce}, {@code consume}: produce keyed records
 *       with the 4.x client's default producer settings (idempotent, acks=all), and/or read
 *       the topic back with manual assignment of every partition from the earliest offset
 *       (no consumer group).
 *   <li>{@code group}: read the topic as a member of consumer group {@code --group} (classic
 *       protocol unless {@code --group-protocol consumer}, subscribe, commitSync after
 *       processing each poll); see {@link GroupReader}.
 *   <li>{@code stream}: produce at {@code --rate} records a second for {@code --duration-ms}
 *       while reading in group {@code --group}, then drain; see {@link Stream}.
 *   <li>{@code txn}: produce with a transactional producer (ten records per transaction,
 *       every third transaction aborted; aborted records are reported as failed), then
 *       read everything back with {@code isolation.level=read_committed}.
 *   <li>{@code share}: read the topic as a member of share group {@code --group}, rejecting
 *       records keyed {@code --reject-key}, releasing some once, accepting the rest, until
 *       idle for {@code --idle-ms}; see {@link ShareReader}.
 * </ul>
 *
 * <p>Usage: {@code Client BOOTSTRAP TOPIC [--mode both|produce|consume|group|stream|txn|share]
 * [--count N] [--keys K] [--timeout-ms MS] [--name LABEL] [--group G]
 * [--group-protocol classic|consumer] [--duration-ms MS] [--rate N] [--reject-key K]
 * [--idle-ms MS] [--process-ms MS] [--max-poll N]}. Exits 1 with a message on stderr on any
 * error, 2 on bad usage. The client library logs at WARN to stderr; {@code
 * -Dinterop.log=debug} shows its protocol traffic.
 */
public final class Client {
    private static final String USAGE = "usage: Client BOOTSTRAP TOPIC [--mode both|produce|consume|group|stream|txn|share]"
            + " [--count N] [--keys K] [--timeout-ms MS] [--name LABEL] [--group G] [--group-protocol classic|consumer]"
            + " [--duration-ms MS] [--rate N] [--reject-key K] [--idle-ms MS] [--process-ms MS] [--max-poll N]";

    private Client() {}

    public static void main(String[] args) {
        // slf4j-simple reads this once, on first use: keep client chatter off stderr.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", System.getProperty("interop.log", "warn"));
        Options opts;
        try {
            opts = Options.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("java client: " + e.getMessage());
            System.err.println(USAGE);
            System.exit(2);
            return;
        }
        try {
            System.out.println(run(opts));
            System.out.flush();
        } catch (Exception e) {
            System.err.println("java client: " + e);
            System.exit(1);
        }
        // Kafka client threads are non-daemon in some paths; leave promptly.
        System.exit(0);
    }

    private static String run(Options o) throws Exception {
        long deadline = System.nanoTime() + o.timeoutMs * 1_000_000L;
        Summary s = new Summary(o.topic);
        switch (o.mode) {
            case "group" -> {
                long start = System.nanoTime();
                try (GroupReader r = new GroupReader(o, false)) {
                    r.readUntilCaughtUp(o.count, deadline);
                    s.field("consume_ms", (System.nanoTime() - start) / 1_000_000);
                    s.produced(List.of());
                    s.consumed(r.records());
                    s.group(o.group, r.assignments());
                }
            }
            case "stream" -> Stream.run(o, deadline, s);
            case "txn" -> {
                long start = System.nanoTime();
                List<Failed> aborted = new ArrayList<>();
                List<Produced> produced = produceTransactions(o, aborted);
                s.field("produce_ms", (System.nanoTime() - start) / 1_000_000);
                s.produced(produced);
                s.failed(aborted);
                start = System.nanoTime();
                List<ConsumerRecord<byte[], byte[]>> consumed = consume(o, produced, deadline);
                s.field("consume_ms", (System.nanoTime() - start) / 1_000_000);
                s.consumed(consumed);
            }
            case "share" -> {
                long start = System.nanoTime();
                try (ShareReader r = new ShareReader(o)) {
                    r.run(o.idleMs, deadline);
                    s.field("consume_ms", (System.nanoTime() - start) / 1_000_000);
                    s.produced(List.of());
                    s.deliveries(r.deliveries());
                    s.group(o.group, List.of());
                }
            }
            default -> {
                List<Produced> produced = List.of();
                if (!o.mode.equals("consume")) {
                    long start = System.nanoTime();
                    produced = produce(o);
                    s.field("produce_ms", (System.nanoTime() - start) / 1_000_000);
                }
                s.produced(produced);
                if (!o.mode.equals("produce")) {
                    long start = System.nanoTime();
                    List<ConsumerRecord<byte[], byte[]>> consumed = consume(o, produced, deadline);
                    s.field("consume_ms", (System.nanoTime() - start) / 1_000_000);
                    s.consumed(consumed);
                }
            }
        }
        return s.finish();
    }

    /** The headers every interop record carries; see interop/README.md. */
    static RecordHeaders headers(String name, int i) {
        RecordHeaders headers = new RecordHeaders();
        headers.add("client", utf8(name));
        headers.add("seq", utf8(Integer.toString(i)));
        headers.add("dup", utf8("first"));
        headers.add("dup", utf8("second"));
        if (i % 10 == 0) {
            headers.add("empty", new byte[0]);
            headers.add("nil", null);
        }
        return headers;
    }

    static Properties producerProps(Options o, String clientId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return p;
    }

    static Properties consumerProps(Options o, String clientId) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return p;
    }

    private static List<Produced> produce(Options o) throws Exception {
        // Nothing else is set: the 4.x defaults (enable.idempotence=true, acks=all) are the point.
        Properties p = producerProps(o, "strata-interop-" + o.name);
        RecordMetadata[] acks = new RecordMetadata[o.count];
        AtomicReference<Exception> failure = new AtomicReference<>();
        List<Produced> produced = new ArrayList<>(o.count);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<ProducerRecord<byte[], byte[]>> sent = new ArrayList<>(o.count);
            for (int i = 0; i < o.count; i++) {
                byte[] key = utf8(String.format("key-%02d", i % o.keys));
                byte[] value = utf8(String.format("%s-%04d", o.name, i));
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(o.topic, null, key, value, headers(o.name, i));
                sent.add(rec);
                final int slot = i;
                producer.send(rec, (md, err) -> {
                    if (err != null) {
                        failure.compareAndSet(null, err);
                    } else {
                        acks[slot] = md;
                    }
                });
            }
            producer.flush();
            if (failure.get() != null) {
                throw new Exception("produce failed: " + failure.get(), failure.get());
            }
            for (int i = 0; i < o.count; i++) {
                if (acks[i] == null) {
                    throw new Exception("record " + i + " was never acknowledged");
                }
                ProducerRecord<byte[], byte[]> rec = sent.get(i);
                produced.add(new Produced(rec.key(), rec.value(), rec.headers(), acks[i]));
            }
        }
        return produced;
    }

    /**
     * Writes {@code --count} records with a transactional producer, ten per
     * transaction, aborting every third transaction: committed records are returned,
     * aborted ones added to {@code aborted} with the error "aborted".
     */
    private static List<Produced> produceTransactions(Options o, List<Failed> aborted) throws Exception {
        Properties p = producerProps(o, "strata-interop-" + o.name + "-txn");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "strata-interop-" + o.name);
        List<Produced> produced = new ArrayList<>(o.count);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            for (int first = 0, txn = 0; first < o.count; first += 10, txn++) {
                boolean abort = txn % 3 == 2;
                producer.beginTransaction();
                List<ProducerRecord<byte[], byte[]>> sent = new ArrayList<>();
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                for (int i = first; i < Math.min(first + 10, o.count); i++) {
                    byte[] key = utf8(String.format("key-%02d", i % o.keys));
                    byte[] value = utf8(String.format("%s-%04d", o.name, i));
                    ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(o.topic, null, key, value, headers(o.name, i));
                    sent.add(rec);
                    acks.add(producer.send(rec));
                }
                producer.flush();
                if (abort) {
                    producer.abortTransaction();
                    for (ProducerRecord<byte[], byte[]> rec : sent) {
                        aborted.add(new Failed(rec.key(), rec.value(), rec.headers(), "aborted"));
                    }
                    continue;
                }
                producer.commitTransaction();
                for (int i = 0; i < sent.size(); i++) {
                    ProducerRecord<byte[], byte[]> rec = sent.get(i);
                    produced.add(new Produced(rec.key(), rec.value(), rec.headers(), acks.get(i).get()));
                }
            }
        }
        return produced;
    }

    private static List<ConsumerRecord<byte[], byte[]>> consume(
            Options o, List<Produced> produced, long deadline) throws Exception {
        // No group.id: manual assignment only, nothing is committed.
        Properties p = consumerProps(o, "strata-interop-" + o.name + "-reader");
        if (o.mode.equals("txn")) {
            p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        }
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<PartitionInfo> infos = consumer.partitionsFor(o.topic, remaining(deadline));
            if (infos == null || infos.isEmpty()) {
                throw new Exception("topic " + o.topic + " has no partitions");
            }
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo info : infos) {
                tps.add(new TopicPartition(info.topic(), info.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);

            // Read until every partition reaches the end offset seen now, which covers
            // everything acknowledged above, and until every acknowledged record was seen.
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, remaining(deadline));
            Set<String> missing = new HashSet<>();
            for (Produced r : produced) {
                missing.add(r.md().partition() + "/" + r.md().offset());
            }
            while (true) {
                Map<TopicPartition, Long> behind = new HashMap<>();
                for (TopicPartition tp : tps) {
                    long pos = consumer.position(tp, remaining(deadline));
                    if (pos < end.get(tp)) {
                        behind.put(tp, pos);
                    }
                }
                if (behind.isEmpty() && missing.isEmpty()) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    throw new Exception("deadline passed with " + missing.size()
                            + " acknowledged records unread; positions behind the end " + behind
                            + ", end offsets " + end);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    out.add(r);
                    missing.remove(r.partition() + "/" + r.offset());
                }
            }
        }
        return out;
    }

    static Duration remaining(long deadline) {
        return Duration.ofNanos(Math.max(1, deadline - System.nanoTime()));
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Command-line options. */
    static final class Options {
        String bootstrap;
        String topic;
        String mode = "both";
        int count = 200;
        int keys = 20;
        long timeoutMs = 60_000;
        String name = "java";
        String group;
        String groupProtocol = "classic";
        String rejectKey;
        long idleMs = 5_000;
        long processMs;
        int maxPoll;
        long durationMs = 10_000;
        int rate = 100;

        static Options parse(String[] args) {
            Options o = new Options();
            List<String> pos = new ArrayList<>();
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                if (!a.startsWith("--")) {
                    pos.add(a);
                    continue;
                }
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(a + " needs a value");
                }
                String v = args[++i];
                switch (a) {
                    case "--mode" -> {
                        if (!List.of("both", "produce", "consume", "group", "stream", "txn", "share").contains(v)) {
                            throw new IllegalArgumentException("unknown mode " + v);
                        }
                        o.mode = v;
                    }
                    case "--count" -> o.count = positive(a, v);
                    case "--keys" -> o.keys = positive(a, v);
                    case "--timeout-ms" -> o.timeoutMs = positive(a, v);
                    case "--name" -> o.name = v;
                    case "--group" -> o.group = v;
                    case "--reject-key" -> o.rejectKey = v;
                    case "--idle-ms" -> o.idleMs = positive(a, v);
                    case "--process-ms" -> o.processMs = positive(a, v);
                    case "--max-poll" -> o.maxPoll = positive(a, v);
                    case "--group-protocol" -> {
                        if (!List.of("classic", "consumer").contains(v)) {
                            throw new IllegalArgumentException("unknown group protocol " + v);
                        }
                        o.groupProtocol = v;
                    }
                    case "--duration-ms" -> o.durationMs = positive(a, v);
                    case "--rate" -> o.rate = positive(a, v);
                    default -> throw new IllegalArgumentException("unknown option " + a);
                }
            }
            if (pos.size() != 2) {
                throw new IllegalArgumentException("want BOOTSTRAP and TOPIC, got " + pos);
            }
            if ((o.mode.equals("group") || o.mode.equals("stream") || o.mode.equals("share"))
                    && (o.group == null || o.group.isEmpty())) {
                throw new IllegalArgumentException("--mode " + o.mode + " needs --group");
            }
            o.bootstrap = pos.get(0);
            o.topic = pos.get(1);
            return o;
        }

        private static int positive(String flag, String v) {
            try {
                int n = Integer.parseInt(v);
                if (n > 0) {
                    return n;
                }
            } catch (NumberFormatException e) {
                // reported below
            }
            throw new IllegalArgumentException(flag + " wants a positive integer, got " + v);
        }
    }
}
