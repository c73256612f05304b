"""The event backbone on NATS: the only package that imports faststream or nats.

`ports` holds what services depend on without importing NATS (`Publisher`); `broker` and `streams` wire the
faststream `NatsBroker` and JetStream streams; `relay` publishes the outbox; `consumer` is the idempotent durable
pull consumer with its dead-letter queue; `rpc` is request/reply on `podway.rpc.*`.
"""
