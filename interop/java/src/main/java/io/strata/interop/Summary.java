package io.strata.interop;

import java.util.Base64;
import java.util.List;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * The JSON summary every interop client prints (format: interop/report/report.go), built
 * field by field: bytes are base64, absent bytes null.
 */
final class Summary {
    private static final Base64.Encoder B64 = Base64.getEncoder();

    private final StringBuilder out = new StringBuilder(64 * 1024);

    Summary(String topic) {
        out.append("{\"client\":\"java\",\"library\":");
        str(out, "kafka-clients " + AppInfoParser.getVersion());
        out.append(",\"topic\":");
        str(out, topic);
    }

    void field(String name, long value) {
        out.append(",\"").append(name).append("\":").append(value);
    }

    void produced(List<Produced> produced) {
        out.append(",\"produced\":[");
        for (int i = 0; i < produced.size(); i++) {
            Produced r = produced.get(i);
            if (i > 0) {
                out.append(',');
            }
            record(r.key(), r.value(), r.headers());
            out.append(",\"partition\":").append(r.md().partition());
            out.append(",\"offset\":").append(r.md().offset());
            out.append('}');
        }
        out.append(']');
    }

    void failed(List<Failed> failed) {
        out.append(",\"failed\":[");
        for (int i = 0; i < failed.size(); i++) {
            Failed f = failed.get(i);
            if (i > 0) {
                out.append(',');
            }
            record(f.key(), f.value(), f.headers());
            out.append(",\"error\":");
            str(out, f.error());
            out.append('}');
        }
        out.append(']');
    }

    void consumed(List<ConsumerRecord<byte[], byte[]>> consumed) {
        out.append(",\"consumed\":[");
        for (int i = 0; i < consumed.size(); i++) {
            ConsumerRecord<byte[], byte[]> r = consumed.get(i);
            if (i > 0) {
                out.append(',');
            }
            out.append("{\"partition\":").append(r.partition());
            out.append(",\"offset\":").append(r.offset());
            out.append(",\"key\":");
            bytes(out, r.key());
            out.append(",\"value\":");
            bytes(out, r.value());
            out.append(",\"headers\":");
            headers(out, r.headers());
            out.append('}');
        }
        out.append(']');
    }

    void deliveries(List<ShareReader.Delivery> deliveries) {
        out.append(",\"deliveries\":[");
        for (int i = 0; i < deliveries.size(); i++) {
            ShareReader.Delivery d = deliveries.get(i);
            if (i > 0) {
                out.append(',');
            }
            out.append("{\"partition\":").append(d.record().partition());
            out.append(",\"offset\":").append(d.record().offset());
            out.append(",\"key\":");
            bytes(out, d.record().key());
            out.append(",\"value\":");
            bytes(out, d.record().value());
            out.append(",\"delivery_count\":").append(d.count());
            out.append(",\"ack\":");
            str(out, d.ack());
            out.append('}');
        }
        out.append(']');
    }

    void group(String group, List<List<Integer>> assignments) {
        out.append(",\"group\":");
        str(out, group);
        out.append(",\"assignments\":").append(assignments.toString().replace(" ", ""));
    }

    String finish() {
        return out.append('}').toString();
    }

    /** Opens a record object and writes its key, value and headers. */
    private void record(byte[] key, byte[] value, Iterable<Header> headers) {
        out.append("{\"key\":");
        bytes(out, key);
        out.append(",\"value\":");
        bytes(out, value);
        out.append(",\"headers\":");
        headers(out, headers);
    }

    /** One acknowledged send: what was sent and where the broker said it landed. */
    record Produced(byte[] key, byte[] value, Iterable<Header> headers, RecordMetadata md) {}

    /** One send the producer gave up on. */
    record Failed(byte[] key, byte[] value, Iterable<Header> headers, String error) {}

    private static void bytes(StringBuilder out, byte[] b) {
        if (b == null) {
            out.append("null");
        } else {
            out.append('"').append(B64.encodeToString(b)).append('"');
        }
    }

    private static void headers(StringBuilder out, Iterable<Header> headers) {
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
