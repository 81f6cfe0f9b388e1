#!/usr/bin/env python3
"""Split every captured stream into Pulsar frames and list each frame's BaseCommand type.

    python3 scripts/capture/check.py [DIR]      (default: tests/data/captures)

Frame: [u32 BE total_size][u32 BE command_size][BaseCommand][payload section?]
where total_size counts everything after itself. Only the BaseCommand's first
field (field 1 `type`, a varint) is decoded, by hand. For frames with a payload
section (SEND, MESSAGE) the listing adds `+crc` if it starts with the checksum
magic 0x0e01 (and verifies the CRC32C), `+bem` for broker-entry-metadata magic
0x0e02, or `+raw` if it has neither. Exits 1 if any stream does not split into
whole frames or a checksum is wrong. Standard library only.
"""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

NAMES = {
    2: "CONNECT", 3: "CONNECTED", 4: "SUBSCRIBE", 5: "PRODUCER", 6: "SEND", 7: "SEND_RECEIPT",
    8: "SEND_ERROR", 9: "MESSAGE", 10: "ACK", 11: "FLOW", 12: "UNSUBSCRIBE", 13: "SUCCESS",
    14: "ERROR", 15: "CLOSE_PRODUCER", 16: "CLOSE_CONSUMER", 17: "PRODUCER_SUCCESS", 18: "PING",
    19: "PONG", 20: "REDELIVER_UNACKNOWLEDGED_MESSAGES", 21: "PARTITIONED_METADATA",
    22: "PARTITIONED_METADATA_RESPONSE", 23: "LOOKUP", 24: "LOOKUP_RESPONSE", 25: "CONSUMER_STATS",
    26: "CONSUMER_STATS_RESPONSE", 27: "REACHED_END_OF_TOPIC", 28: "SEEK", 29: "GET_LAST_MESSAGE_ID",
    30: "GET_LAST_MESSAGE_ID_RESPONSE", 31: "ACTIVE_CONSUMER_CHANGE", 32: "GET_TOPICS_OF_NAMESPACE",
    33: "GET_TOPICS_OF_NAMESPACE_RESPONSE", 34: "GET_SCHEMA", 35: "GET_SCHEMA_RESPONSE",
    36: "AUTH_CHALLENGE", 37: "AUTH_RESPONSE", 38: "ACK_RESPONSE", 39: "GET_OR_CREATE_SCHEMA",
    40: "GET_OR_CREATE_SCHEMA_RESPONSE", 68: "TOPIC_MIGRATED",
}


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_T = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def command_type(cmd: bytes) -> int:
    key, pos = varint(cmd, 0)
    if key != (1 << 3 | 0):  # field 1, wire type varint
        raise ValueError(f"first field key is {key:#x}, expected 0x08")
    return varint(cmd, pos)[0]


def frames(data: bytes) -> tuple[list[str], list[str]]:
    """Returns (labels, problems)."""
    labels, problems = [], []
    pos = 0
    while pos < len(data):
        if len(data) - pos < 8:
            problems.append(f"{len(data) - pos} trailing byte(s) at offset {pos}")
            break
        total = int.from_bytes(data[pos:pos + 4], "big")
        end = pos + 4 + total
        if end > len(data):
            problems.append(f"frame at offset {pos} wants {total} bytes, only {len(data) - pos - 4} left")
            break
        cmd_size = int.from_bytes(data[pos + 4:pos + 8], "big")
        if 4 + cmd_size > total:
            problems.append(f"frame at offset {pos}: command size {cmd_size} > total {total}")
            break
        cmd = data[pos + 8:pos + 8 + cmd_size]
        rest = data[pos + 8 + cmd_size:end]
        try:
            t = command_type(cmd)
            label = NAMES.get(t, f"UNKNOWN_{t}") + f"={t}"
        except ValueError as e:
            problems.append(f"frame at offset {pos}: {e}")
            label = "UNPARSABLE"
        if rest:
            if rest[:2] == b"\x0e\x01":
                want = int.from_bytes(rest[2:6], "big")
                ok = crc32c(rest[6:]) == want
                label += "+crc" if ok else "+crc(BAD)"
                if not ok:
                    problems.append(f"frame at offset {pos}: checksum mismatch")
            elif rest[:2] == b"\x0e\x02":
                label += "+bem"
            else:
                label += "+raw"
        labels.append(label)
        pos = end
    return labels, problems


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "tests/data/captures"
    pat = re.compile(r"^(?P<sc>.+)\.conn(?P<n>\d+)\.(?P<dir>c2b|b2c)\.bin$")
    files = []
    for f in root.glob("*.bin"):
        m = pat.match(f.name)
        if m:
            files.append((m["sc"], int(m["n"]), 0 if m["dir"] == "c2b" else 1, f))
    if not files:
        print(f"no captures in {root}")
        return 1
    bad = 0
    per_scenario: dict[str, set[str]] = defaultdict(set)
    last_sc = None
    for sc, n, d, f in sorted(files):
        if sc != last_sc:
            print(f"\n== {sc}")
            last_sc = sc
        labels, problems = frames(f.read_bytes())
        print(f"  conn{n} {'c2b' if d == 0 else 'b2c'} ({f.stat().st_size} B, {len(labels)} frames): " + " ".join(labels))
        for p in problems:
            print(f"    PROBLEM: {p}")
        bad += len(problems)
        per_scenario[sc].update(label.split("=")[0] for label in labels)
    print("\n== command types seen per scenario")
    for sc in sorted(per_scenario):
        print(f"  {sc}: {', '.join(sorted(per_scenario[sc]))}")
    print(f"\n{len(files)} files, {bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
