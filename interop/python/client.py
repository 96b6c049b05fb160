"""Strata interop client for Python (confluent-kafka, librdkafka inside).

Produces keyed records with acks=all, reads the topic back with manual assignment of
every partition from the earliest offset (no consumer group), and prints one JSON summary
on stdout in the format shared by every interop client (see interop/README.md).

--mode group reads the topic instead as a member of consumer group --group: subscribe(),
automatic commits off, a synchronous commit after each batch of records is processed.
The member stops once the topic holds at least --count records, it has reached the end
of every partition it owns (partition EOF events) and the group has committed the end
offset of every partition.

The producer sets partitioner=murmur2_random: librdkafka's own default (consistent_random,
CRC32) places keys differently from the Java client; murmur2_random is its documented
Java-compatible choice.

Usage: client.py BOOTSTRAP TOPIC [--mode both|produce|consume|group] [--count N] [--keys K]
                 [--timeout-ms MS] [--name LABEL] [--group G] [--config KEY=VALUE]...
Exits 1 with a message on stderr on any error, 2 on bad usage.

Records with a null header value, an empty header value and a repeated header key are
among those sent, to check headers survive exactly.
"""

import argparse
import base64
import json
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient


class InteropError(Exception):
    """A failure the client reports and exits on."""


def b64(b):
    return None if b is None else base64.b64encode(b).decode("ascii")


def headers_json(headers):
    return [{"key": k, "value": b64(v)} for k, v in (headers or [])]


def record_headers(name, i):
    headers = [
        ("client", name.encode()),
        ("seq", str(i).encode()),
        ("dup", b"first"),
        ("dup", b"second"),
    ]
    if i % 10 == 0:
        headers += [("empty", b""), ("nil", None)]
    return headers


def base_conf(opts):
    """The bootstrap servers and every --config KEY=VALUE (e.g. SASL and TLS settings)."""
    conf = {"bootstrap.servers": opts.bootstrap}
    for kv in opts.config:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise InteropError("--config %r is not KEY=VALUE" % kv)
        conf[key] = value
    return conf


def produce(opts, deadline):
    errors = []
    producer = Producer(
        {
            **base_conf(opts),
            "client.id": "strata-interop-" + opts.name,
            "acks": "all",
            "partitioner": "murmur2_random",
            "error_cb": lambda err: errors.append(str(err)) if err.fatal() else None,
        }
    )
    produced = [None] * opts.count

    def on_delivery(slot, sent):
        def report(err, msg):
            if err is not None:
                errors.append("record %d: %s" % (slot, err))
                return
            produced[slot] = dict(sent, partition=msg.partition(), offset=msg.offset())

        return report

    for i in range(opts.count):
        key = ("key-%02d" % (i % opts.keys)).encode()
        value = ("%s-%04d" % (opts.name, i)).encode()
        headers = record_headers(opts.name, i)
        sent = {"key": b64(key), "value": b64(value), "headers": headers_json(headers)}
        while True:
            try:
                producer.produce(opts.topic, value=value, key=key, headers=headers,
                                 on_delivery=on_delivery(i, sent))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)

    left = producer.flush(max(0.0, deadline - time.monotonic()))
    if errors:
        raise InteropError("produce failed: " + "; ".join(errors[:5]))
    if left:
        raise InteropError("deadline passed with %d records unacknowledged" % left)
    missing = [i for i, r in enumerate(produced) if r is None]
    if missing:
        raise InteropError("records never acknowledged: %s" % missing[:10])
    return produced


def consume(opts, produced, deadline):
    admin = AdminClient(base_conf(opts))
    md = admin.list_topics(topic=opts.topic, timeout=max(1.0, deadline - time.monotonic()))
    topic = md.topics.get(opts.topic)
    if topic is None or topic.error is not None or not topic.partitions:
        raise InteropError("topic %s not usable: %s" % (opts.topic, topic and topic.error))

    consumer = Consumer(
        {
            **base_conf(opts),
            "client.id": "strata-interop-%s-reader" % opts.name,
            # The Python binding refuses a consumer without group.id, so one is named, but
            # the consumer only assign()s: it never joins, syncs or commits. librdkafka may
            # still look the group's coordinator up (FindCoordinator) in the background.
            "group.id": "strata-interop-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        tps = [TopicPartition(opts.topic, p) for p in sorted(topic.partitions)]
        end = {}
        for tp in tps:
            _, high = consumer.get_watermark_offsets(
                tp, timeout=max(1.0, deadline - time.monotonic()))
            end[tp.partition] = high
        consumer.assign([TopicPartition(opts.topic, tp.partition, confluent_kafka.OFFSET_BEGINNING)
                         for tp in tps])

        missing = {(r["partition"], r["offset"]) for r in produced}
        nxt = {tp.partition: 0 for tp in tps}
        out = []
        while missing or any(nxt[p] < end[p] for p in end):
            if time.monotonic() > deadline:
                raise InteropError(
                    "deadline passed with %d acknowledged records unread; next offsets %s, "
                    "end offsets %s" % (len(missing), nxt, end))
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                raise InteropError("consume failed: %s" % msg.error())
            out.append(record_json(msg))
            missing.discard((msg.partition(), msg.offset()))
            nxt[msg.partition()] = msg.offset() + 1
        return out
    finally:
        consumer.close()


def record_json(msg):
    return {
        "partition": msg.partition(),
        "offset": msg.offset(),
        "key": b64(msg.key()),
        "value": b64(msg.value()),
        "headers": headers_json(msg.headers()),
    }


def consume_group(opts, deadline):
    """Reads the topic as a group member; returns (records read, assignments)."""
    consumer = Consumer(
        {
            **base_conf(opts),
            "client.id": "strata-interop-%s-group" % opts.name,
            "group.id": opts.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    # A second client of the group that never joins it asks for end offsets and
    # committed offsets: on the member's own connections those requests would queue
    # behind its long-polling fetches.
    watcher = Consumer(
        {
            **base_conf(opts),
            "client.id": "strata-interop-%s-group-watcher" % opts.name,
            "group.id": opts.group,
            "enable.auto.commit": False,
        }
    )
    owned = set()
    eof = {}  # partition -> offset at which it last reached the end
    assignments = []

    def on_assign(_consumer, parts):
        owned.clear()
        owned.update(p.partition for p in parts)
        for p in owned:
            eof.pop(p, None)
        assignments.append(sorted(owned))

    def on_revoke(_consumer, _parts):
        owned.clear()

    def timeout():
        return max(1.0, deadline - time.monotonic())

    def behind():
        if not assignments:
            return "waiting for a first assignment"
        parts = watcher.list_topics(opts.topic, timeout=timeout()).topics[opts.topic].partitions
        tps = [TopicPartition(opts.topic, p) for p in sorted(parts)]
        end = {tp.partition: watcher.get_watermark_offsets(tp, timeout=timeout())[1] for tp in tps}
        if sum(end.values()) < opts.count:
            return "the topic holds %d of %d records" % (sum(end.values()), opts.count)
        for p in sorted(owned):
            if eof.get(p, -1) < end[p]:
                return "partition %d not read to its end %d yet" % (p, end[p])
        for tp in watcher.committed(tps, timeout=timeout()):
            if tp.error is not None or tp.offset < end[tp.partition]:
                return "the group has not committed partition %d's end %d (%s)" % (
                    tp.partition, end[tp.partition], tp.error or tp.offset)
        return None

    out = []
    try:
        consumer.subscribe([opts.topic], on_assign=on_assign, on_revoke=on_revoke)
        while True:
            got = 0
            for msg in consumer.consume(num_messages=500, timeout=0.2):
                err = msg.error()
                if err is not None and err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    eof[msg.partition()] = msg.offset()
                    continue
                if err is not None:
                    raise InteropError("consume failed: %s" % err)
                out.append(record_json(msg))
                got += 1
            if got:
                consumer.commit(asynchronous=False)
            why = behind()
            if why is None:
                return out, assignments
            if time.monotonic() > deadline:
                raise InteropError("deadline passed, still %s; read %d records, assignments %s"
                                   % (why, len(out), assignments))
    finally:
        consumer.close()
        watcher.close()


def parse(argv):
    p = argparse.ArgumentParser(prog="client.py", description=__doc__.splitlines()[0])
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("--mode", choices=("both", "produce", "consume", "group"), default="both")
    p.add_argument("--group", default="")
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--keys", type=int, default=20)
    p.add_argument("--timeout-ms", type=int, default=60000)
    p.add_argument("--name", default="python")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a librdkafka property for every client, e.g. security.protocol=SASL_SSL")
    opts = p.parse_args(argv)
    for flag in ("count", "keys", "timeout_ms"):
        if getattr(opts, flag) <= 0:
            p.error("--%s wants a positive integer" % flag.replace("_", "-"))
    if opts.mode == "group" and not opts.group:
        p.error("--mode group needs --group")
    return opts


def main(argv):
    opts = parse(argv)
    deadline = time.monotonic() + opts.timeout_ms / 1000.0
    summary = {
        "client": "python",
        "library": "confluent-kafka %s (librdkafka %s)"
        % (confluent_kafka.__version__, confluent_kafka.libversion()[0]),
        "topic": opts.topic,
        "produced": [],
    }
    try:
        if opts.mode == "group":
            start = time.monotonic()
            summary["consumed"], summary["assignments"] = consume_group(opts, deadline)
            summary["consume_ms"] = int((time.monotonic() - start) * 1000)
            summary["group"] = opts.group
        if opts.mode in ("both", "produce"):
            start = time.monotonic()
            summary["produced"] = produce(opts, deadline)
            summary["produce_ms"] = int((time.monotonic() - start) * 1000)
        if opts.mode in ("both", "consume"):
            start = time.monotonic()
            summary["consumed"] = consume(opts, summary["produced"], deadline)
            summary["consume_ms"] = int((time.monotonic() - start) * 1000)
    except Exception as e:  # any failure: one clear line, non-zero exit
        print("python client: %s" % e, file=sys.stderr)
        return 1
    json.dump(summary, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
