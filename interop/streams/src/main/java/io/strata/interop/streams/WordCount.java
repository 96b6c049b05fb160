package io.strata.interop.streams;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Counts words: reads lines from INPUT, splits them into lower-case words, re-keys each
 * word (a repartition topic), counts per word in a state store backed by a compacted
 * changelog topic, and writes every new count to OUTPUT as word -> count (a long).
 *
 * <p>Usage: WordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR GUARANTEE [KEY=VALUE...]
 * (GUARANTEE is at_least_once or exactly_once_v2; each KEY=VALUE is one more Streams
 * config, e.g. replication.factor=3 for the internal topics). It prints RUNNING once the
 * application reaches that state and runs until it is sent SIGTERM, then closes cleanly
 * and exits 0; it exits 1 if the application enters ERROR.
 */
public final class WordCount {
  public static void main(String[] args) throws Exception {
    if (args.length < 6) {
      System.err.println("usage: WordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR GUARANTEE [KEY=VALUE...]");
      System.exit(2);
    }
    Properties props = new Properties();
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[5]);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
    props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
    props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
    for (int i = 6; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      if (eq <= 0) {
        System.err.println("not a KEY=VALUE config: " + args[i]);
        System.exit(2);
      }
      props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
    }

    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
        .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
        .filter((key, word) -> !word.isEmpty())
        .map((key, word) -> KeyValue.pair(word, word))
        .groupByKey(Grouped.with("words", Serdes.String(), Serdes.String()))
        .count(Materialized.as("counts"))
        .toStream()
        .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch done = new CountDownLatch(1);
    int[] exit = {0};
    streams.setStateListener((now, before) -> {
      System.out.println("STATE " + before + " -> " + now);
      if (now == KafkaStreams.State.RUNNING) {
        System.out.println("RUNNING");
      }
      if (now == KafkaStreams.State.ERROR) {
        exit[0] = 1;
        done.countDown();
      }
      System.out.flush();
    });
    streams.setUncaughtExceptionHandler(e -> {
      System.err.println("uncaught: " + e);
      e.printStackTrace();
      return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    // SIGTERM: close cleanly and exit 0 from the hook itself; a JVM whose hooks
    // return on a signal exits with 143.
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close(Duration.ofSeconds(30));
      System.out.flush();
      Runtime.getRuntime().halt(exit[0]);
    }));
    streams.start();
    done.await();
    if (exit[0] != 0) {
      streams.close(Duration.ofSeconds(10));
    }
    System.out.flush();
    Runtime.getRuntime().halt(exit[0]);
  }
}
