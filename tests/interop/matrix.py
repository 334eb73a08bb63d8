"""The matrix test's hands outside sluice (tests/matrix.rs): producers and readers a user has.

  matrix.py parquet OUT.parquet < EVENTS.ndjson      pyarrow writes the changes (8 rows a group)
  matrix.py avro BROKERS TOPIC REGISTRY < EVENTS.ndjson
                                                     confluent-kafka's AvroSerializer produces them,
                                                     keyed by id, each in a batch of its own
  matrix.py read TABLE [TABLE ...]                   Python delta-rs reads each table: one JSON
                                                     line per table, its rows with the columns the
                                                     matrix compares

A change is {"id", "seq", "op", "v", "ts"}; `ts` stays text in Parquet and Avro, so a change
whose time is written another way is a dead letter there too."""
import json
import os
import sys

COLUMNS = ["id", "seq", "op", "v", "__start_at", "__end_at", "dt", "hour", "n", "s"]


def changes():
    return [json.loads(line) for line in sys.stdin if line.strip()]


def parquet(out):
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.int64()), ("seq", pa.int64()), ("op", pa.string()),
                        ("v", pa.string()), ("ts", pa.string())])
    pq.write_table(pa.Table.from_pylist(changes(), schema=schema), out, row_group_size=8)


SCHEMA = json.dumps({"type": "record", "name": "Change", "namespace": "sluice.matrix",
                     "fields": [{"name": "id", "type": "long"}, {"name": "seq", "type": "long"},
                                {"name": "op", "type": "string"}, {"name": "v", "type": "string"},
                                {"name": "ts", "type": "string"}]})


def avro(brokers, topic, registry_url):
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}), SCHEMA)
    # One message a batch: tansu loses the rest of a batch when a fetch starts inside it.
    producer = Producer({"bootstrap.servers": brokers, "linger.ms": 0,
                         "batch.num.messages": 1, "enable.idempotence": True})
    context = SerializationContext(topic, MessageField.VALUE)
    for change in changes():
        producer.produce(topic, key=str(change["id"]), value=serializer(change, context))
        producer.poll(0)
    if producer.flush(120) != 0:
        sys.exit("not every message was delivered")


def plain(value):
    if value is None or isinstance(value, (int, str)):
        return value
    return str(value)


def read(tables):
    from deltalake import DeltaTable

    for path in tables:
        table = DeltaTable(path)
        names = [c for c in COLUMNS if c in table.schema().to_arrow().names]
        rows = table.to_pyarrow_table(columns=names).to_pylist()
        print(json.dumps({"table": path, "version": table.version(),
                          "rows": [{k: plain(v) for k, v in r.items()} for r in rows]}))


def main():
    what, args = sys.argv[1], sys.argv[2:]
    if what == "parquet":
        parquet(args[0])
    elif what == "avro":
        avro(*args)
    elif what == "read":
        read(args)
    else:
        sys.exit(f"unknown command {what}")
    sys.stdout.flush()
    # Python delta-rs can abort at interpreter exit (a known delta-rs bug).
    os._exit(0)


if __name__ == "__main__":
    main()
