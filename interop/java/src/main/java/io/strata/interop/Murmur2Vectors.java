package io.strata.interop;

import java.util.HexFormat;

import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.utils.Utils;

/**
 * Prints what the Java client computes for keyed records, so that Strata's
 * internal/keyhash can be checked against it: for each key given as hex on the command
 * line, one line {@code HEX MURMUR2 P1 P2 P3 P7 P12 P100} (HEX is "-" for the empty key), where Pn is the partition the
 * default partitioner picks for that key among n partitions.
 */
public final class Murmur2Vectors {
    private static final int[] PARTITION_COUNTS = {1, 2, 3, 7, 12, 100};

    private Murmur2Vectors() {}

    public static void main(String[] args) {
        HexFormat hex = HexFormat.of();
        for (String a : args) {
            byte[] key;
            try {
                key = hex.parseHex(a);
            } catch (IllegalArgumentException e) {
                System.err.println("murmur2 vectors: not hex: " + a);
                System.exit(2);
                return;
            }
            StringBuilder line = new StringBuilder(a.isEmpty() ? "-" : a);
            line.append(' ').append(Utils.murmur2(key));
            for (int n : PARTITION_COUNTS) {
                line.append(' ').append(BuiltInPartitioner.partitionForKey(key, n));
            }
            System.out.println(line);
        }
    }
}
