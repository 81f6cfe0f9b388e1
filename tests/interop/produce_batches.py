"""Produces batched messages with the official client, one batch per codec,
with keys, properties and event times; writes what it sent to OUT as JSON lines (not stdout: the client logs there).

Usage: produce_batches.py SERVICE_URL TOPIC OUT
"""
import json
import sys

import pulsar

url, topic, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
out = open(out_path, "w")
client = pulsar.Client(url)
codecs = ["NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY"]
for codec in codecs:
    producer = client.create_producer(
        topic,
        compression_type=getattr(pulsar.CompressionType, codec),
        batching_enabled=True,
        batching_max_messages=4,
        batching_max_publish_delay_ms=60_000,
    )
    for i in range(4):
        text = f"{codec}-{i}-" + "payload " * (i + 3)
        props = {"codec": codec, "index": str(i)}
        key = f"key-{codec}-{i}"
        producer.send_async(
            text.encode(), lambda res, msg_id: None, partition_key=key, properties=props, event_timestamp=1_000 + i
        )
        sent = {"payload": text, "key": key, "properties": props, "event_time": 1_000 + i}
        out.write(json.dumps(sent) + "\n")
    producer.flush()
    producer.close()
client.close()
out.close()
