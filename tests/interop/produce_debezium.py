"""Produces Debezium change events to a Kafka topic as Debezium's Kafka Connect converters
write them through the schema registry: with `--format avro` (io.confluent.connect.avro.
AvroConverter) each value an Avro record `Envelope {before, after: [null, Value], source:
Source, op, ts_ms}` and each key a record `Key {id}`; with `--format protobuf`
(ProtobufConverter) the messages of debezium.proto. Both in the Confluent wire format
(confluent-kafka's serializers register `TOPIC-value` and `TOPIC-key`), and after each delete
a tombstone (the key with no value), as Debezium sends for log compaction.

  produce_debezium.py --format avro|protobuf --registry URL [--row FIELDS --key K[,K]]
      BROKERS TOPIC CHANGES.ndjson

CHANGES.ndjson holds the change events as Debezium's JSON converter writes them, one per
line, by default for a table `users (id bigint, name text, score double precision)`; a
`source` block's missing fields are nulls. With --row (avro only), the row's Avro fields as a
JSON list (a `decimal` takes the value's text exactly, a `date` ISO text) and --key the key's
field names. Prints the number of messages produced."""
import argparse
import json
import sys
from datetime import date
from decimal import Decimal

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

NS = "dbserver1.public.users"


def nullable(t):
    return ["null", t]


USERS = [
    {"name": "id", "type": "long"},
    {"name": "name", "type": nullable("string"), "default": None},
    {"name": "score", "type": nullable("double"), "default": None},
]
SOURCE = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.postgresql",
          "fields": [{"name": name, "type": nullable(t), "default": None} for name, t in [
              ("version", "string"), ("connector", "string"), ("name", "string"),
              ("ts_ms", "long"), ("snapshot", "string"), ("db", "string"),
              ("schema", "string"), ("table", "string"), ("txId", "long"), ("lsn", "long")]]}


def envelope(row_fields):
    value = {"type": "record", "name": "Value", "namespace": NS, "fields": row_fields}
    return {"type": "record", "name": "Envelope", "namespace": NS, "fields": [
        {"name": "before", "type": nullable(value), "default": None},
        {"name": "after", "type": nullable(f"{NS}.Value"), "default": None},
        {"name": "source", "type": SOURCE},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": nullable("long"), "default": None},
    ]}


def key_schema(row_fields, key):
    types = {f["name"]: f["type"] for f in row_fields}
    return {"type": "record", "name": "Key", "namespace": NS,
            "fields": [{"name": k, "type": types[k]} for k in key]}


def logical(t):
    """The logical type of a field's type (inside a union with null), if any."""
    for branch in (t if isinstance(t, list) else [t]):
        if isinstance(branch, dict) and "logicalType" in branch:
            return branch["logicalType"]
    return None


def typed_row(row, row_fields):
    """`row` with its decimals as Decimal (from the number's shortest text: exact for the
    digits of a numeric(p<=15)) and dates as dates."""
    if row is None:
        return None
    out = dict(row)
    for f in row_fields:
        v = out.get(f["name"])
        kind = logical(f["type"])
        if v is None or kind is None:
            continue
        if kind == "decimal":
            out[f["name"]] = Decimal(str(v))
        elif kind == "date":
            out[f["name"]] = date.fromisoformat(v)
    return out


def protobuf_serializers(registry):
    """Serializers of debezium.proto's Envelope and Key, compiled with grpcio-tools' protoc."""
    import tempfile
    from pathlib import Path

    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
    from grpc_tools import protoc

    here = Path(__file__).parent
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "debezium.pb"
        if protoc.main(["protoc", f"-I{here}", f"--descriptor_set_out={out}",
                        "debezium.proto"]) != 0:
            sys.exit("protoc failed on debezium.proto")
        pool = descriptor_pool.DescriptorPool()
        for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
            pool.AddSerializedFile(file.SerializeToString())
    classes = {name: message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"{NS}.{name}")) for name in ("Envelope", "Key")}
    envelope = ProtobufSerializer(classes["Envelope"], registry)
    key = ProtobufSerializer(classes["Key"], registry)

    def values(change, ctx):
        change = {k: v for k, v in change.items() if v is not None}
        return envelope(json_format.ParseDict(change, classes["Envelope"]()), ctx)

    def keys(k, ctx):
        return key(json_format.ParseDict(k, classes["Key"]()), ctx)
    return values, keys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--format", choices=["avro", "protobuf"], required=True)
    parser.add_argument("--registry", required=True)
    parser.add_argument("--row", help="avro: the row's fields (a JSON list)")
    parser.add_argument("--key", default="id", help="the key's fields, comma-separated")
    parser.add_argument("brokers")
    parser.add_argument("topic")
    parser.add_argument("changes")
    args = parser.parse_args()
    registry = SchemaRegistryClient({"url": args.registry})
    row_fields = json.loads(args.row) if args.row else USERS
    key_names = args.key.split(",")
    if args.format == "avro":
        values = AvroSerializer(registry, json.dumps(envelope(row_fields)))
        keys = AvroSerializer(registry, json.dumps(key_schema(row_fields, key_names)))
    else:
        values, keys = protobuf_serializers(registry)
    value_of = SerializationContext(args.topic, MessageField.VALUE)
    key_of = SerializationContext(args.topic, MessageField.KEY)
    producer = Producer({"bootstrap.servers": args.brokers, "linger.ms": 0,
                         "batch.num.messages": 1, "enable.idempotence": True, "acks": "all"})
    failed = []

    def delivered(err, _msg):
        if err is not None:
            failed.append(err)

    def send(key, value):
        while True:
            try:
                producer.produce(args.topic, key=key, value=value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)

    count = 0
    with open(args.changes, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            change = json.loads(line)
            source = change.get("source") or {}
            if args.format == "avro":
                change["source"] = {f["name"]: source.get(f["name"]) for f in SOURCE["fields"]}
                for image in ("before", "after"):
                    change[image] = typed_row(change.get(image), row_fields)
            row = change.get("after") or change.get("before") or {}
            key = keys({k: row.get(k, 0) for k in key_names}, key_of)
            send(key, values(change, value_of))
            count += 1
            if change["op"] == "d":
                send(key, None)
                count += 1
    left = producer.flush(60)
    if left or failed:
        sys.exit(f"{left} messages not delivered, {len(failed)} failed: {failed[:3]}")
    print(f"produced {count} Debezium {args.format} messages (tombstones after deletes)")


if __name__ == "__main__":
    main()
