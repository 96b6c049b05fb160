package io.strata.interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
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
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * Interop client for the Java runtime: produces keyed records with the 4.x client's default
 * producer settings (idempotent, acks=all), reads the topic back with manual assignment of
 * every partition from the earliest offset (no consumer group), and prints one JSON summary
 * on stdout. The summary format is shared by every interop client; see interop/README.md.
 *
 * <p>Usage: {@code Client BOOTSTRAP TOPIC [--mode both|produce|consume] [--count N]
 * [--keys K] [--timeout-ms MS] [--name LABEL]}. Exits 1 with a message on stderr on any
 * error, 2 on bad usage. The client library logs at WARN to stderr; {@code -Dinterop.log=debug}
 * shows its protocol traffic.
 */
public final class Client {
    private static final Base64.Encoder B64 = Base64.getEncoder();

    private Client() {}

    public static void main(String[] args) {
        // slf4j-simple reads this once, on first use: keep client chatter off stderr.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", System.getProperty("interop.log", "warn"));
        Options opts;
        try {
            opts = Options.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("java client: " + e.getMessage());
            System.err.println("usage: Client BOOTSTRAP TOPIC [--mode both|produce|consume]"
                    + " [--count N] [--keys K] [--timeout-ms MS] [--name LABEL]");
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
        StringBuilder out = new StringBuilder(64 * 1024);
        out.append("{\"client\":\"java\",\"library\":");
        Json.str(out, "kafka-clients " + AppInfoParser.getVersion());
        out.append(",\"topic\":");
        Json.str(out, o.topic);

        List<Produced> produced = new ArrayList<>();
        if (o.produce) {
            long start = System.nanoTime();
            produced = produce(o);
            out.append(",\"produce_ms\":").append((System.nanoTime() - start) / 1_000_000);
        }
        out.append(",\"produced\":[");
        for (int i = 0; i < produced.size(); i++) {
            if (i > 0) {
                out.append(',');
            }
            produced.get(i).appendJson(out);
        }
        out.append(']');

        if (o.consume) {
            long start = System.nanoTime();
            List<ConsumerRecord<byte[], byte[]>> consumed = consume(o, produced, deadline);
            out.append(",\"consume_ms\":").append((System.nanoTime() - start) / 1_000_000);
            out.append(",\"consumed\":[");
            for (int i = 0; i < consumed.size(); i++) {
                ConsumerRecord<byte[], byte[]> r = consumed.get(i);
                if (i > 0) {
                    out.append(',');
                }
                out.append("{\"partition\":").append(r.partition());
                out.append(",\"offset\":").append(r.offset());
                out.append(",\"key\":");
                Json.bytes(out, r.key());
                out.append(",\"value\":");
                Json.bytes(out, r.value());
                out.append(",\"headers\":");
                Json.headers(out, r.headers());
                out.append('}');
            }
            out.append(']');
        }
        return out.append('}').toString();
    }

    /** One acknowledged send: what was sent and where the broker said it landed. */
    private record Produced(byte[] key, byte[] value, Iterable<Header> headers, RecordMetadata md) {
        void appendJson(StringBuilder out) {
            out.append("{\"key\":");
            Json.bytes(out, key);
            out.append(",\"value\":");
            Json.bytes(out, value);
            out.append(",\"headers\":");
            Json.headers(out, headers);
            out.append(",\"partition\":").append(md.partition());
            out.append(",\"offset\":").append(md.offset());
            out.append('}');
        }
    }

    private static List<Produced> produce(Options o) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "strata-interop-" + o.name);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        // Nothing else is set: the 4.x defaults (enable.idempotence=true, acks=all) are the point.

        RecordMetadata[] acks = new RecordMetadata[o.count];
        AtomicReference<Exception> failure = new AtomicReference<>();
        List<Produced> produced = new ArrayList<>(o.count);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<ProducerRecord<byte[], byte[]>> sent = new ArrayList<>(o.count);
            for (int i = 0; i < o.count; i++) {
                byte[] key = utf8(String.format("key-%02d", i % o.keys));
                byte[] value = utf8(String.format("%s-%04d", o.name, i));
                RecordHeaders headers = new RecordHeaders();
                headers.add("client", utf8(o.name));
                headers.add("seq", utf8(Integer.toString(i)));
                headers.add("dup", utf8("first"));
                headers.add("dup", utf8("second"));
                if (i % 10 == 0) {
                    headers.add("empty", new byte[0]);
                    headers.add("nil", null);
                }
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(o.topic, null, key, value, headers);
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

    private static List<ConsumerRecord<byte[], byte[]>> consume(
            Options o, List<Produced> produced, long deadline) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "strata-interop-" + o.name + "-reader");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        // No group.id: manual assignment only, nothing is committed.

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

    private static Duration remaining(long deadline) {
        return Duration.ofNanos(Math.max(1, deadline - System.nanoTime()));
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Command-line options. */
    private static final class Options {
        String bootstrap;
        String topic;
        boolean produce = true;
        boolean consume = true;
        int count = 200;
        int keys = 20;
        long timeoutMs = 60_000;
        String name = "java";

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
                        switch (v) {
                            case "both" -> { o.produce = true; o.consume = true; }
                            case "produce" -> { o.produce = true; o.consume = false; }
                            case "consume" -> { o.produce = false; o.consume = true; }
                            default -> throw new IllegalArgumentException("unknown mode " + v);
                        }
                    }
                    case "--count" -> o.count = positive(a, v);
                    case "--keys" -> o.keys = positive(a, v);
                    case "--timeout-ms" -> o.timeoutMs = positive(a, v);
                    case "--name" -> o.name = v;
                    default -> throw new IllegalArgumentException("unknown option " + a);
                }
            }
            if (pos.size() != 2) {
                throw new IllegalArgumentException("want BOOTSTRAP and TOPIC, got " + pos);
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

    /** The few JSON encodings the summary needs; bytes are base64, absent bytes null. */
    static final class Json {
        private Json() {}

        static void bytes(StringBuilder out, byte[] b) {
            if (b == null) {
                out.append("null");
            } else {
                out.append('"').append(B64.encodeToString(b)).append('"');
            }
        }

        static void headers(StringBuilder out, Iterable<Header> headers) {
            out.append('[');
            boolean first = true;
            for (Header h : headers) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                out.append("{\"key\":");
                str(out, h.key());
                out.append(",\"value\":");
                bytes(out, h.value());
                out.append('}');
            }
            out.append(']');
        }

        static void str(StringBuilder out, String s) {
            out.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    default -> {
                        if (c < 0x20) {
                            out.append(String.format("\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                    }
                }
            }
            out.append('"');
        }
    }
}
