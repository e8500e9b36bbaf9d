// Shared by the Node scripts tests/protocol drives: arguments, logging to stderr (stdout carries
// only the JSON result), time-outs that name the step that hung.
'use strict'

function args () {
  const [bootstrap, options] = process.argv.slice(2)
  return { bootstrap, options: options ? JSON.parse(options) : {} }
}

function log (...parts) {
  process.stderr.write(parts.map(p => (typeof p === 'string' ? p : JSON.stringify(p))).join(' ') + '\n')
}

// KafkaJS logs through this instead of console.* (which would mix with the result on stdout)
const kafkajsLogCreator = () => ({ namespace, level, log: entry }) => {
  const { message, ...extra } = entry
  log(`[kafkajs ${level} ${namespace}] ${message}`, extra)
}

async function within (ms, what, promise) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

// Run main(args) and print its result as one JSON line; any failure exits 1 with the reason.
function run (main) {
  main(args()).then(
    result => {
      const json = JSON.stringify(result, (_, v) => (typeof v === 'bigint' ? String(v) : v))
      process.stdout.write(json + '\n')
      process.exit(0)
    },
    error => {
      log('FAILED:', error && error.stack ? error.stack : String(error))
      process.exit(1)
    }
  )
}

module.exports = { args, log, kafkajsLogCreator, within, run }
