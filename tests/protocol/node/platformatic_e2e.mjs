// @platformatic/kafka end to end: admin (create, metadata with topic ids, list, describe groups,
// committed offsets, delete), an idempotent producer sending every codec, and a group of two
// consumers that rebalances when the second joins. It names topics by id in Fetch (v13+), so it
// reads only from a broker that serves topic ids. Options and result: see tests/protocol/e2e.py.
import { Admin, Consumer, Producer, stringDeserializers, stringSerializers } from '@platformatic/kafka'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { log, within, run } = require('./common.js')

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function waitFor (what, ms, check, state = () => '') {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms ${state()}`)
    await sleep(100)
  }
}

function client (bootstrap, clientId) {
  return { clientId, bootstrapBrokers: [bootstrap], retries: 3, retryDelay: 250, timeout: 15000 }
}

async function produce (producer, topic, phase) {
  const offsets = []
  for (const codec of [...new Set(phase.map(m => m.codec))]) {
    const messages = phase.filter(m => m.codec === codec)
    const result = await within(20000, `producing with ${codec}`, producer.send({
      compression: codec,
      messages: messages.map(m => ({ topic, partition: m.partition, key: m.key, value: m.value, headers: m.headers }))
    }))
    offsets.push({ codec, offsets: result.offsets })
  }
  return offsets
}

function reader (name, received, phaseOf) {
  return message => {
    const headers = {}
    for (const [k, v] of message.headers) headers[k] = v
    received.push({
      consumer: name,
      phase: phaseOf(),
      partition: message.partition,
      offset: String(message.offset),
      key: message.key,
      value: message.value,
      headers
    })
  }
}

// A fetch sent before a rebalance may still be long-polling after it and would hand records
// of a partition the consumer no longer owns to it (and its autocommit would commit them); once
// every consumer has completed two more fetches, all of them were sent under the new assignment.
async function settled (fetches) {
  const before = { ...fetches }
  await waitFor('fetches under the new assignment', 30000, () =>
    Object.keys(fetches).every(name => fetches[name] >= (before[name] || 0) + 2))
}

function keysSeen (received) {
  return new Set(received.map(r => r.key))
}

run(async ({ bootstrap, options }) => {
  const { topic, groupId, partitions, phases, scratchTopic } = options
  const admin = new Admin(client(bootstrap, 'pk-admin'))
  await within(20000, 'createTopics', admin.createTopics({ topics: [topic, scratchTopic], partitions, replicas: 1 }))
  const metadata = await admin.metadata({ topics: [topic] })
  const topicId = metadata.topics.get(topic).id
  const listed = await admin.listTopics()

  const producer = new Producer({ ...client(bootstrap, 'pk-producer'), serializers: stringSerializers, idempotent: true, acks: -1 })
  const produced = [await produce(producer, topic, phases[0])]

  let phase = 0
  const received = []
  const fetches = {}
  const consumers = []
  const streams = []
  async function join (name) {
    const consumer = new Consumer({
      ...client(bootstrap, name),
      groupId,
      deserializers: stringDeserializers,
      sessionTimeout: 10000,
      rebalanceTimeout: 15000,
      heartbeatInterval: 300
    })
    const stream = await within(30000, `${name} joining ${groupId}`, consumer.consume({
      topics: [topic], mode: 'committed', fallbackMode: 'earliest', autocommit: 200, maxWaitTime: 500
    }))
    stream.on('data', reader(name, received, () => phase))
    stream.on('fetch', () => { fetches[name] = (fetches[name] || 0) + 1 })
    stream.on('error', error => log(`${name} stream error`, String(error)))
    consumers.push(consumer)
    streams.push(stream)
    return consumer
  }

  const first = await join('pk-consumer-1')
  const phase0Keys = phases[0].map(m => m.key)
  await waitFor('consumer 1 reading the first phase', 30000, () => phase0Keys.every(k => keysSeen(received).has(k)))
  const assignedAlone = (first.assignments || []).map(a => ({ topic: a.topic, partitions: [...a.partitions] }))

  await join('pk-consumer-2')
  const owned = c => (c.assignments || []).flatMap(a => a.topic === topic ? [...a.partitions] : [])
  await waitFor('the group rebalancing over two members', 30000, () => {
    const [a, b] = consumers.map(owned)
    return a.length > 0 && b.length > 0 && new Set([...a, ...b]).size === partitions && a.length + b.length === partitions
  })
  const assignments = Object.fromEntries(consumers.map((c, i) => [`pk-consumer-${i + 1}`, owned(c).sort()]))
  await settled(fetches)
  const groups = await admin.describeGroups({ groups: [groupId] })
  const group = groups.get(groupId)
  const described = {
    state: group.state,
    protocolType: group.protocolType,
    protocol: group.protocol,
    members: [...group.members.values()].map(m => ({
      clientId: m.clientId,
      topics: m.metadata ? m.metadata.topics : null,
      assigned: m.assignments ? [...m.assignments.values()].map(a => ({ topic: a.topic, partitions: a.partitions })) : null
    }))
  }

  phase = 1
  produced.push(await produce(producer, topic, phases[1]))
  const phase1Keys = phases[1].map(m => m.key)
  await waitFor('the group reading the second phase', 30000, () => phase1Keys.every(k => keysSeen(received).has(k)))
  // autocommit: everything read is committed while the members are still in the group
  const ends = {}
  for (const m of phases.flat()) ends[m.partition] = String(Number(ends[m.partition] || 0) + 1)
  let committed = {}
  await waitFor('the group committing all it read', 30000, async () => {
    const offsets = await admin.listConsumerGroupOffsets({ groups: [groupId] })
    committed = {}
    for (const g of offsets) {
      for (const t of g.topics) for (const p of t.partitions) committed[p.partitionIndex] = String(p.committedOffset)
    }
    return JSON.stringify(committed) === JSON.stringify(ends)
  }, () => JSON.stringify({ committed, ends, assignments: consumers.map(owned) }))
  phase = 2 // closing: a partition may pass to the other member and be read again
  for (const s of streams) await s.close()
  for (const c of consumers) await within(20000, 'consumer close', c.close())
  const emptyGroup = (await admin.describeGroups({ groups: [groupId] })).get(groupId).state

  await admin.deleteTopics({ topics: [scratchTopic] })
  const afterDelete = await admin.listTopics()
  await producer.close()
  await admin.close()
  return {
    topicId,
    listed,
    afterDelete,
    produced,
    received,
    assignedAlone,
    assignments,
    described,
    committed,
    emptyGroup,
    fetches
  }
})
