"""Produces `sluice generate --shape nested` events to a Kafka topic the way production
producers do, with confluent-kafka (pip install 'confluent-kafka[avro,json,protobuf]', and
grpcio-tools for protobuf):

  produce.py --format json BROKERS TOPIC EVENTS.ndjson
  produce.py --format avro|json-schema --registry URL [--avro-references] BROKERS TOPIC EVENTS.ndjson
  produce.py --format protobuf --registry URL [--sent SENT.ndjson] BROKERS TOPIC EVENTS.ndjson

json: each line as it is. avro: confluent-kafka's AvroSerializer, which registers the schema
with the schema registry and writes the Confluent wire format (0x00, the schema id, the Avro
body). json-schema: its JSONSerializer, which validates each event against a JSON Schema,
registers it and writes the same prefix before the JSON text. Avro events without `coupon` are written with schema version 1; events that carry it (the generator's
`--new-fields-from`) with version 2, which adds `coupon` and `actor.plan`: the topic's schema
gains fields half way, and duplicate deliveries of older events keep version 1, so the versions
interleave. protobuf: its ProtobufSerializer with the messages of proto/v1 and proto/v2
(events.proto imports common.proto, registered as a reference; the same two fields added in
v2); each event is what proto3 can carry of it: a null list or map is empty, and --sent
writes the events as sent (proto3's view of them, ts as RFC 3339 text) for a reader to
compare with. `type` is an Avro enum, `amount` a decimal(10,2), `payload.labels` a map, `commits`
an array of records; nulls at every level are unions with null. Each message is keyed by its
event_id and sent in a record batch of its own (tansu loses the rest of a batch when a fetch
starts inside it: ../shared/notes/test-servers.md). Prints the number of messages and the
schema versions registered."""
import argparse
import json
import sys
import tempfile
from decimal import Decimal
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext


def nullable(t):
    return ["null", t]


def schema(grown: bool) -> str:
    actor = [{"name": "id", "type": "long"}, {"name": "login", "type": "string"},
             {"name": "display", "type": nullable("string")}]
    if grown:
        actor.append({"name": "plan", "type": nullable("string"), "default": None})
    author = {"type": "record", "name": "Author",
              "fields": [{"name": "name", "type": "string"},
                         {"name": "email", "type": nullable("string")}]}
    commit = {"type": "record", "name": "Commit",
              "fields": [{"name": "sha", "type": "string"},
                         {"name": "author", "type": nullable(author)},
                         {"name": "message", "type": "string"}]}
    payload = {"type": "record", "name": "Payload", "fields": [
        {"name": "action", "type": "string"},
        {"name": "number", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 10, "scale": 2}},
        {"name": "commits", "type": nullable({"type": "array", "items": commit})},
        {"name": "labels", "type": nullable({"type": "map", "values": "string"})},
    ]}
    fields = [
        {"name": "event_id", "type": "string"},
        {"name": "ts", "type": "string"},
        {"name": "type", "type": {"type": "enum", "name": "Kind",
                                  "symbols": ["view", "cart", "purchase"]}},
        {"name": "actor", "type": {"type": "record", "name": "Actor", "fields": actor}},
        {"name": "repo", "type": nullable({"type": "record", "name": "Repo", "fields": [
            {"name": "id", "type": "int"}, {"name": "name", "type": "string"}]})},
        {"name": "payload", "type": payload},
    ]
    if grown:
        fields.append({"name": "coupon", "type": nullable("string"), "default": None})
    return json.dumps({"type": "record", "name": "GitHubEvent", "namespace": "sluice.test",
                       "fields": fields})


JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "GitHubEvent",
    "type": "object",
    "properties": {
        "event_id": {"type": "string"},
        "ts": {"type": "string"},
        "type": {"enum": ["view", "cart", "purchase"]},
        "actor": {"type": "object"},
        "payload": {"type": "object"},
    },
    "required": ["event_id", "ts", "type"],
})


def referencing_serializer(registry, grown: bool):
    """An AvroSerializer whose schema references Actor by name: Actor registered under its
    own subject (sluice.test.Actor, a version per schema version), as shared types are with
    Confluent's schema references."""
    from confluent_kafka.schema_registry import Schema, SchemaReference

    full = json.loads(schema(grown))
    actor_field = next(f for f in full["fields"] if f["name"] == "actor")
    actor = dict(actor_field["type"], namespace="sluice.test")
    registry.register_schema("sluice.test.Actor", Schema(json.dumps(actor), "AVRO"))
    version = registry.lookup_schema("sluice.test.Actor", Schema(json.dumps(actor), "AVRO")).version
    actor_field["type"] = "Actor"
    main = Schema(json.dumps(full), "AVRO",
                  [SchemaReference("sluice.test.Actor", "sluice.test.Actor", version)])
    return AvroSerializer(registry, main)


PROTO = Path(__file__).parent / "proto"


def protobuf_classes():
    """The GitHubEvent message class of proto/v1 and of proto/v2, each compiled (grpcio-tools'
    protoc) into a descriptor pool of its own: both versions keep the same names, as a schema
    that evolves does."""
    import grpc_tools
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    classes = {}
    with tempfile.TemporaryDirectory() as tmp:
        for grown, version in ((False, "v1"), (True, "v2")):
            out = Path(tmp) / f"{version}.pb"
            code = protoc.main(["protoc", f"-I{PROTO / version}", f"-I{well_known}",
                                "--include_imports", f"--descriptor_set_out={out}",
                                "events.proto"])
            if code != 0:
                sys.exit(f"protoc failed on {PROTO / version}/events.proto")
            pool = descriptor_pool.DescriptorPool()
            for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
                pool.AddSerializedFile(file.SerializeToString())
            message = pool.FindMessageTypeByName("sluice.example.GitHubEvent")
            classes[grown] = message_factory.GetMessageClass(message)
    return classes


def as_sent(message) -> dict:
    """A message as proto3 carries it, field by field: a field with presence that is not set
    as None, enums by name, timestamps as RFC 3339 text, 64-bit integers as numbers, the
    amount's text as the number it stands for."""
    out = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            value_field = entry.fields_by_name["value"]
            out[field.name] = {k: plain(value_field, v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [plain(field, v) for v in value]
        elif field.has_presence and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = plain(field, value)
    return out


def plain(field, value):
    if field.message_type is not None:
        if field.message_type.full_name == "google.protobuf.Timestamp":
            return value.ToJsonString()
        return as_sent(value)
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    if field.name == "amount":
        return float(Decimal(value))
    return value


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--format", choices=["json", "avro", "protobuf", "json-schema"],
                        required=True)
    parser.add_argument("--registry", help="the schema registry's URL (not for json)")
    parser.add_argument("--sent", help="protobuf: write the events as sent here (NDJSON)")
    parser.add_argument("--avro-references", action="store_true",
                        help="avro: register Actor as a subject of its own, referenced by name")
    parser.add_argument("brokers")
    parser.add_argument("topic")
    parser.add_argument("events")
    args = parser.parse_args()
    topic = args.topic
    serialize = None
    if args.format != "json" and not args.registry:
        sys.exit(f"--format {args.format} needs --registry URL")
    if args.format == "json-schema":
        registry = SchemaRegistryClient({"url": args.registry})
        serializer = JSONSerializer(JSON_SCHEMA, registry)

        def serialize(event):
            return serializer(event, SerializationContext(topic, MessageField.VALUE))
    if args.format == "avro":
        registry = SchemaRegistryClient({"url": args.registry})
        if args.avro_references:
            serializers = {grown: referencing_serializer(registry, grown)
                           for grown in (False, True)}
        else:
            serializers = {grown: AvroSerializer(registry, schema(grown))
                           for grown in (False, True)}

        def serialize(event):
            grown = "coupon" in event
            return serializers[grown](event, SerializationContext(topic, MessageField.VALUE))
    sent = None
    if args.format == "protobuf":
        from google.protobuf import json_format
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        registry = SchemaRegistryClient({"url": args.registry})
        classes = protobuf_classes()
        serializers = {grown: ProtobufSerializer(cls, registry)
                       for grown, cls in classes.items()}
        sent = open(args.sent, "w") if args.sent else None

        def serialize(event):
            grown = "coupon" in event
            payload = event.get("payload")
            if payload and payload.get("amount") is not None:
                payload["amount"] = str(payload["amount"])
            message = json_format.ParseDict(event, classes[grown]())
            if sent:
                sent.write(json.dumps(as_sent(message), ensure_ascii=False) + "\n")
            return serializers[grown](message, SerializationContext(topic, MessageField.VALUE))
    producer = Producer({"bootstrap.servers": args.brokers, "linger.ms": 0,
                         "batch.num.messages": 1, "enable.idempotence": True, "acks": "all"})
    failed = []

    def delivered(err, _msg):
        if err is not None:
            failed.append(err)

    count = 0
    with open(args.events, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            # Avro decimals (and Protobuf's decimal text) from the text's exact value; JSON
            # writes Python's floats.
            exact = args.format in ("avro", "protobuf")
            event = json.loads(line, parse_float=Decimal if exact else float)
            value = serialize(event) if serialize else line.rstrip(b"\n")
            while True:
                try:
                    producer.produce(topic, key=event["event_id"].encode(), value=value,
                                     on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            count += 1
    left = producer.flush(60)
    if sent:
        sent.close()
    if left or failed:
        sys.exit(f"{left} messages not delivered, {len(failed)} failed: {failed[:3]}")
    if serialize:
        versions = registry.get_versions(f"{topic}-value")
        kind = {"avro": "Avro", "protobuf": "Protobuf"}.get(args.format, "JSON Schema")
        print(f"produced {count} {kind} messages; {topic}-value versions {versions}")
    else:
        print(f"produced {count} JSON messages")


if __name__ == "__main__":
    main()
