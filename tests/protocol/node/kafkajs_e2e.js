// KafkaJS end to end, the same scenario as platformatic_e2e.mjs (see tests/protocol/e2e.py):
// admin, an idempotent producer sending every codec (snappy through kafkajs-snappy, lz4 frames
// through lz4-napi), and a group of two consumers that rebalances when the second joins.
// KafkaJS knows nothing of topic ids: it must keep working as the broker serves them.
'use strict'
const { AssignerProtocol, CompressionCodecs, CompressionTypes, Kafka, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4-napi')
const { kafkajsLogCreator, log, within, run } = require('./common')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  compress: async encoder => lz4.compressFrameSync(encoder.buffer),
  decompress: async buffer => lz4.decompressFrameSync(buffer)
})
const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function waitFor (what, ms, check) {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`)
    await sleep(100)
  }
}

async function produce (producer, topic, phase) {
  const offsets = []
  for (const codec of [...new Set(phase.map(m => m.codec))]) {
    const messages = phase.filter(m => m.codec === codec)
    const result = await within(20000, `producing with ${codec}`, producer.send({
      topic,
      acks: -1,
      compression: CODECS[codec],
      messages: messages.map(m => ({ partition: m.partition, key: m.key, value: m.value, headers: m.headers }))
    }))
    offsets.push({ codec, offsets: result.map(r => ({ partition: r.partition, baseOffset: r.baseOffset })) })
  }
  return offsets
}

run(async ({ bootstrap, options }) => {
  const { topic, groupId, partitions, phases, scratchTopic } = options
  const kafka = new Kafka({
    clientId: 'kjs',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    logCreator: kafkajsLogCreator,
    retry: { retries: 5 }
  })
  const admin = kafka.admin()
  await admin.connect()
  await within(20000, 'createTopics', admin.createTopics({
    topics: [{ topic, numPartitions: partitions }, { topic: scratchTopic, numPartitions: 1 }],
    waitForLeaders: true
  }))
  const listed = await admin.listTopics()
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] })

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const produced = [await produce(producer, topic, phases[0])]

  let phase = 0
  const received = []
  const fetches = {}
  const consumers = []
  const assignments = {}
  async function join (name) {
    const consumer = kafka.consumer({
      groupId,
      sessionTimeout: 10000,
      rebalanceTimeout: 15000,
      heartbeatInterval: 300,
      maxWaitTimeInMs: 500
    })
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      assignments[name] = (payload.memberAssignment[topic] || []).slice().sort()
    })
    consumer.on(consumer.events.FETCH, () => { fetches[name] = (fetches[name] || 0) + 1 })
    consumer.on(consumer.events.CRASH, ({ payload }) => log(`${name} crashed`, String(payload.error)))
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({
      autoCommitInterval: 200,
      eachMessage: async ({ partition, message }) => {
        const headers = {}
        for (const [k, v] of Object.entries(message.headers || {})) headers[k] = v.toString()
        received.push({
          consumer: name,
          phase,
          partition,
          offset: message.offset,
          key: message.key.toString(),
          value: message.value.toString(),
          headers
        })
      }
    })
    consumers.push(consumer)
  }
  const seen = () => new Set(received.map(r => r.key))

  await join('kjs-consumer-1')
  await waitFor('consumer 1 reading the first phase', 30000, () => phases[0].every(m => seen().has(m.key)))
  const assignedAlone = assignments['kjs-consumer-1']

  await join('kjs-consumer-2')
  await waitFor('the group rebalancing over two members', 30000, () => {
    const a = assignments['kjs-consumer-1'] || []
    const b = assignments['kjs-consumer-2'] || []
    return a.length > 0 && b.length > 0 && new Set([...a, ...b]).size === partitions && a.length + b.length === partitions
  })
  const rebalanced = { ...assignments } // later joins (as members leave) change `assignments`
  // a fetch sent before the rebalance may still be long-polling (see platformatic_e2e.mjs)
  const before = { ...fetches }
  await waitFor('fetches under the new assignment', 30000, () =>
    Object.keys(fetches).every(name => fetches[name] >= (before[name] || 0) + 2))
  const group = await admin.describeGroups([groupId])
  const g = group.groups[0]
  const described = {
    state: g.state,
    protocolType: g.protocolType,
    protocol: g.protocol,
    members: g.members.map(m => {
      const meta = AssignerProtocol.MemberMetadata.decode(m.memberMetadata)
      const assigned = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)
      return { clientId: m.clientId, topics: meta.topics, assigned: assigned.assignment }
    })
  }

  phase = 1
  produced.push(await produce(producer, topic, phases[1]))
  await waitFor('the group reading the second phase', 30000, () => phases[1].every(m => seen().has(m.key)))
  phase = 2 // closing: a partition may pass to the other member and be read again
  for (const c of consumers) await within(20000, 'consumer disconnect', c.disconnect())

  const fetched = await admin.fetchOffsets({ groupId, topics: [topic] })
  const committed = Object.fromEntries(fetched[0].partitions.map(p => [p.partition, p.offset]))
  const emptyGroup = (await admin.describeGroups([groupId])).groups[0].state

  await admin.deleteTopics({ topics: [scratchTopic] })
  const afterDelete = await admin.listTopics()
  await producer.disconnect()
  await admin.disconnect()
  return {
    listed,
    afterDelete,
    metadataPartitions: metadata.topics[0].partitions.length,
    produced,
    received,
    assignedAlone,
    assignments: rebalanced,
    described,
    committed,
    emptyGroup,
    fetches
  }
})
