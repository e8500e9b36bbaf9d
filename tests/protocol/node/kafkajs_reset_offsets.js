// KafkaJS's admin.resetOffsets({earliest: true}) commits -2 for every partition (Kafka stores
// it as sent); fetchOffsets returns the -2, resolveOffsets turns it into the log start, and the
// group then reads the topic again from there.
'use strict'
const { Kafka, logLevel } = require('kafkajs')
const { kafkajsLogCreator, within, run } = require('./common')

async function consume (kafka, groupId, topic, count, fromBeginning) {
  const consumer = kafka.consumer({ groupId, heartbeatInterval: 500, sessionTimeout: 10000 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning })
  const seen = []
  await within(30000, `group ${groupId} reading ${count} records`, new Promise((resolve, reject) => {
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.push({ partition, offset: message.offset, value: message.value.toString() })
        if (seen.length >= count) resolve()
      }
    }).catch(reject)
  }))
  await consumer.disconnect() // commits what it read
  return seen
}

run(async ({ bootstrap, options }) => {
  const { topic, groupId } = options
  const kafka = new Kafka({
    clientId: 'tidelog-kafkajs-reset',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    logCreator: kafkajsLogCreator,
    retry: { retries: 3 }
  })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true })
  const producer = kafka.producer()
  await producer.connect()
  const values = Array.from({ length: 10 }, (_, i) => `v${i}`)
  await producer.send({ topic, messages: values.map((value, i) => ({ partition: i % 2, value })) })
  await producer.disconnect()

  const first = await consume(kafka, groupId, topic, values.length, true)
  const afterRead = await admin.fetchOffsets({ groupId, topics: [topic] })

  await within(15000, 'admin.resetOffsets({earliest: true})', admin.resetOffsets({ groupId, topic, earliest: true }))
  const raw = await admin.fetchOffsets({ groupId, topics: [topic] })
  const resolved = await admin.fetchOffsets({ groupId, topics: [topic], resolveOffsets: true })
  // fromBeginning: false: only the committed offsets can make it read from the start
  const again = await consume(kafka, groupId, topic, values.length, false)
  await admin.disconnect()
  const offsets = r => Object.fromEntries(r[0].partitions.map(p => [p.partition, p.offset]))
  return {
    first: first.map(m => m.value).sort(),
    afterRead: offsets(afterRead),
    raw: offsets(raw),
    resolved: offsets(resolved),
    again: again.map(m => m.value).sort()
  }
})
