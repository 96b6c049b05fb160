#!/usr/bin/env node
// Strata interop client for Node.js (kafkajs).
//
// Produces keyed records with acks=all (acks: -1) through kafkajs's default partitioner
// (Java-compatible murmur2 since kafkajs 2.0), reads the topic back from the earliest
// offset without a consumer group, and prints one JSON summary on stdout in the format
// shared by every interop client (see interop/README.md).
//
// kafkajs has no manual-assignment consumer: its Consumer always joins a group. The read
// side therefore drives kafkajs's own cluster and broker objects (metadata, ListOffsets,
// Fetch and its record-batch decoder), which is the code its Consumer runs underneath.
// Those are internals of the pinned kafkajs 2.2.4.
//
// --mode group reads the topic instead as a member of consumer group --group with
// kafkajs's own consumer (which always joins a group): subscribe from the beginning,
// automatic commits off, commitOffsets after each batch is processed. The member stops
// once it has joined, two fetch rounds have completed since (kafkajs fetches again only
// after the previous batches are processed, so anything the first fetch returned is
// read), the topic holds at least --count records and the group has committed the end
// offset of every partition. An admin client asks for the offsets on its own
// connections.
//
// Each record is sent with its own send() call so that the acknowledgement (partition and
// base offset) belongs to exactly that record. kafkajs cannot encode a null header value,
// so unlike the other clients no "nil" header is sent.
//
// Usage: client.js BOOTSTRAP TOPIC [--mode both|produce|consume|group] [--count N] [--keys K]
//                  [--timeout-ms MS] [--name LABEL] [--group G] [--config KEY=VALUE]...
// --config takes the librdkafka security properties the other clients take
// (security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.ca.location)
// and gives them to kafkajs as its ssl and sasl options.
// Exits 1 with a message on stderr on any error, 2 on bad usage.
'use strict'

const fs = require('fs')
const { Kafka, Partitioners, logLevel } = require('kafkajs')
const kafkajsVersion = require('kafkajs/package.json').version

class UsageError extends Error {}

function parseArgs(argv) {
  const opts = { mode: 'both', count: 200, keys: 20, timeoutMs: 60000, name: 'node', group: '', config: {} }
  const pos = []
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (!a.startsWith('--')) {
      pos.push(a)
      continue
    }
    if (i + 1 >= argv.length) throw new UsageError(`${a} needs a value`)
    const v = argv[++i]
    const positive = () => {
      const n = Number(v)
      if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${a} wants a positive integer, got ${v}`)
      return n
    }
    switch (a) {
      case '--mode':
        if (!['both', 'produce', 'consume', 'group'].includes(v)) throw new UsageError(`unknown mode ${v}`)
        opts.mode = v
        break
      case '--count': opts.count = positive(); break
      case '--keys': opts.keys = positive(); break
      case '--timeout-ms': opts.timeoutMs = positive(); break
      case '--name': opts.name = v; break
      case '--group': opts.group = v; break
      case '--config': {
        const eq = v.indexOf('=')
        if (eq <= 0) throw new UsageError(`--config ${v} is not KEY=VALUE`)
        opts.config[v.slice(0, eq)] = v.slice(eq + 1)
        break
      }
      default: throw new UsageError(`unknown option ${a}`)
    }
  }
  if (pos.length !== 2) throw new UsageError(`want BOOTSTRAP and TOPIC, got ${JSON.stringify(pos)}`)
  if (opts.mode === 'group' && !opts.group) throw new UsageError('--mode group needs --group')
  ;[opts.bootstrap, opts.topic] = pos
  return opts
}

const b64 = b => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'))

// kafkajs hands headers over as an object whose repeated keys hold arrays; this flattens
// it back into the wire's list. Order is kept per key and by first appearance across keys.
function headersJson(headers) {
  const out = []
  for (const [key, v] of Object.entries(headers || {})) {
    for (const value of Array.isArray(v) ? v : [v]) out.push({ key, value: b64(value) })
  }
  return out
}

function recordHeaders(name, i) {
  const h = { client: name, seq: String(i), dup: ['first', 'second'] }
  if (i % 10 === 0) h.empty = ''
  return h
}

async function produce(kafka, opts) {
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
  })
  await producer.connect()
  const produced = []
  try {
    for (let i = 0; i < opts.count; i++) {
      const key = Buffer.from(`key-${String(i % opts.keys).padStart(2, '0')}`)
      const value = Buffer.from(`${opts.name}-${String(i).padStart(4, '0')}`)
      const headers = recordHeaders(opts.name, i)
      const acks = await producer.send({ topic: opts.topic, acks: -1, messages: [{ key, value, headers }] })
      if (acks.length !== 1 || acks[0].errorCode !== 0) {
        throw new Error(`record ${i}: unexpected acknowledgement ${JSON.stringify(acks)}`)
      }
      produced.push({
        key: b64(key),
        value: b64(value),
        headers: headersJson(headers),
        partition: acks[0].partition,
        offset: Number(acks[0].baseOffset),
      })
    }
  } finally {
    await producer.disconnect()
  }
  return produced
}

// kafkajs keeps its cluster factory behind a private symbol on the Kafka object.
function createCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  if (!sym) throw new Error(`kafkajs ${kafkajsVersion} does not expose its cluster factory as expected`)
  return kafka[sym]({ allowAutoTopicCreation: false, isolationLevel: 1 })
}

async function consume(kafka, opts, produced, deadline) {
  const cluster = createCluster(kafka)
  await cluster.connect()
  try {
    await cluster.addTargetTopic(opts.topic)
    const parts = cluster.findTopicPartitionMetadata(opts.topic).map(p => p.partitionId).sort((a, b) => a - b)
    if (parts.length === 0) throw new Error(`topic ${opts.topic} has no partitions`)
    const offsets = async fromBeginning => {
      const [t] = await cluster.fetchTopicsOffset([
        { topic: opts.topic, partitions: parts.map(partition => ({ partition })), fromBeginning },
      ])
      return Object.fromEntries(t.partitions.map(p => [p.partition, Number(p.offset)]))
    }
    const next = await offsets(true)
    const end = await offsets(false)

    const missing = new Set(produced.map(r => `${r.partition}/${r.offset}`))
    const out = []
    const behind = () => parts.filter(p => next[p] < end[p])
    while (missing.size > 0 || behind().length > 0) {
      if (Date.now() > deadline) {
        throw new Error(`deadline passed with ${missing.size} acknowledged records unread; ` +
          `next offsets ${JSON.stringify(next)}, end offsets ${JSON.stringify(end)}`)
      }
      const byLeader = cluster.findLeaderForPartitions(opts.topic, parts)
      for (const [nodeId, leaderParts] of Object.entries(byLeader)) {
        const broker = await cluster.findBroker({ nodeId })
        const res = await broker.fetch({
          replicaId: -1,
          isolationLevel: 1,
          maxWaitTime: 200,
          topics: [{ topic: opts.topic, partitions: leaderParts.map(partition => ({ partition, fetchOffset: String(next[partition]), maxBytes: 1 << 20 })) }],
        })
        for (const t of res.responses) {
          for (const p of t.partitions) {
            if (p.errorCode !== 0) throw new Error(`fetch ${opts.topic}/${p.partition}: error code ${p.errorCode}`)
            for (const m of p.messages) {
              const offset = Number(m.offset)
              if (offset < next[p.partition]) continue // a batch may start before the asked offset
              next[p.partition] = offset + 1
              if (m.isControlRecord) continue
              out.push(recordJson(p.partition, m))
              missing.delete(`${p.partition}/${offset}`)
            }
          }
        }
      }
    }
    return out
  } finally {
    await cluster.disconnect()
  }
}

const recordJson = (partition, m) =>
  ({ partition, offset: Number(m.offset), key: b64(m.key), value: b64(m.value), headers: headersJson(m.headers) })

async function consumeGroup(kafka, opts, deadline) {
  const admin = kafka.admin()
  const consumer = kafka.consumer({ groupId: opts.group, maxWaitTimeInMs: 200, allowAutoTopicCreation: false })
  const consumed = []
  const assignments = []
  let fetchesSinceJoin = -1 // -1 until the first join
  consumer.on(consumer.events.GROUP_JOIN, e => {
    assignments.push([...(e.payload.memberAssignment[opts.topic] || [])].sort((a, b) => a - b))
    fetchesSinceJoin = 0
  })
  consumer.on(consumer.events.FETCH, () => {
    if (fetchesSinceJoin >= 0) fetchesSinceJoin++
  })

  const behind = async () => {
    if (fetchesSinceJoin < 0) return 'waiting for a first assignment'
    if (fetchesSinceJoin < 2) return 'waiting for two fetch rounds since the last join'
    const end = Object.fromEntries((await admin.fetchTopicOffsets(opts.topic)).map(p => [p.partition, Number(p.high)]))
    const total = Object.values(end).reduce((a, b) => a + b, 0)
    if (total < opts.count) return `the topic holds ${total} of ${opts.count} records`
    const [t] = await admin.fetchOffsets({ groupId: opts.group, topics: [opts.topic] })
    for (const p of t.partitions) {
      if (Number(p.offset) < end[p.partition]) {
        return `the group committed ${p.offset} on partition ${p.partition}, end ${end[p.partition]}`
      }
    }
    return null
  }

  await admin.connect()
  try {
    await consumer.connect()
    await consumer.subscribe({ topics: [opts.topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) consumed.push(recordJson(batch.partition, m))
        if (batch.messages.length > 0) {
          const next = String(Number(batch.lastOffset()) + 1)
          await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next }])
        }
      },
    })
    for (;;) {
      const why = await behind()
      if (why === null) break
      if (Date.now() > deadline) {
        throw new Error(`deadline passed, still ${why}; read ${consumed.length} records, assignments ${JSON.stringify(assignments)}`)
      }
      await new Promise(resolve => setTimeout(resolve, 100))
    }
  } finally {
    await consumer.disconnect()
    await admin.disconnect()
  }
  return { consumed, assignments }
}

// securityOptions turns librdkafka-style --config properties (the ones the other
// clients take) into kafkajs's ssl and sasl options.
function securityOptions(config) {
  const known = ['security.protocol', 'sasl.mechanism', 'sasl.username', 'sasl.password', 'ssl.ca.location']
  for (const k of Object.keys(config)) {
    if (!known.includes(k)) throw new UsageError(`--config ${k}: kafkajs takes only ${known.join(', ')}`)
  }
  const protocol = (config['security.protocol'] || 'PLAINTEXT').toUpperCase()
  if (!['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'].includes(protocol)) {
    throw new UsageError(`unknown security.protocol ${protocol}`)
  }
  const out = {}
  if (protocol.endsWith('SSL')) {
    const ca = config['ssl.ca.location']
    out.ssl = ca ? { ca: [fs.readFileSync(ca, 'utf8')] } : true
  }
  if (protocol.startsWith('SASL_')) {
    out.sasl = {
      mechanism: (config['sasl.mechanism'] || 'PLAIN').toLowerCase(),
      username: config['sasl.username'] || '',
      password: config['sasl.password'] || '',
    }
  }
  return out
}

async function main() {
  let opts, security
  try {
    opts = parseArgs(process.argv.slice(2))
    security = securityOptions(opts.config)
  } catch (e) {
    process.stderr.write(`node client: ${e.message}\n` +
      'usage: client.js BOOTSTRAP TOPIC [--mode both|produce|consume|group] [--count N] [--keys K] [--timeout-ms MS] [--name LABEL] [--group G] [--config KEY=VALUE]...\n')
    return 2
  }
  const deadline = Date.now() + opts.timeoutMs
  const kafka = new Kafka({
    clientId: `strata-interop-${opts.name}`,
    brokers: [opts.bootstrap],
    logLevel: logLevel.ERROR,
    ...security,
  })
  const summary = { client: 'node', library: `kafkajs ${kafkajsVersion}`, topic: opts.topic, produced: [] }
  try {
    if (opts.mode === 'group') {
      const start = Date.now()
      const g = await consumeGroup(kafka, opts, deadline)
      Object.assign(summary, { consume_ms: Date.now() - start, consumed: g.consumed, group: opts.group, assignments: g.assignments })
    }
    if (opts.mode === 'both' || opts.mode === 'produce') {
      const start = Date.now()
      summary.produced = await produce(kafka, opts)
      summary.produce_ms = Date.now() - start
    }
    if (opts.mode === 'both' || opts.mode === 'consume') {
      const start = Date.now()
      summary.consumed = await consume(kafka, opts, summary.produced, deadline)
      summary.consume_ms = Date.now() - start
    }
  } catch (e) {
    process.stderr.write(`node client: ${e.stack || e}\n`)
    return 1
  }
  // A pipe may take the summary only in part; exit once all of it is written.
  await new Promise((resolve, reject) =>
    process.stdout.write(JSON.stringify(summary) + '\n', err => (err ? reject(err) : resolve())))
  return 0
}

main().then(code => process.exit(code), e => {
  process.stderr.write(`node client: ${e.stack || e}\n`)
  process.exit(1)
})
