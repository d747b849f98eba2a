"""The ``collectives:`` section (docs/adr/0021 decision 2): its keys, their checks, and its
canonical content, from which every key at its neutral default is left out (so a file that
leaves the section out, or writes it at its defaults, keeps its fingerprint)."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from sim.limits import MAX_CODE
from sim.topology.checks import check_keys, fail, integer, real, require_mapping
from sim.topology.system import NEUTRAL_PROTOCOLS, PROTOCOLS, CollectivesConfig, ProtocolConfig
from sim.units import ps_for_bytes

__all__ = [
    "AUTO",
    "AUTO_CHANNELS",
    "COLLECTIVES_KEYS",
    "PROTOCOL_CHOICES",
    "PROTOCOL_KEYS",
    "build_collectives",
    "collectives_content",
    "efficiency_duration_cases",
    "with_changes",
]

AUTO = "auto"
AUTO_CHANNELS = -1  # CollectivesConfig.channels for `channels: auto`; 0 is the default
PROTOCOL_CHOICES = (*PROTOCOLS, AUTO)

# key -> (kind, description); kinds: "ns0" (>= 0, whole ps), "channels", "choice", "table"
COLLECTIVES_KEYS: dict[str, tuple[str, str]] = {
    "launch_ns": ("ns0", "once per collective call (kernel launch + host enqueue), ns"),
    "step_sync_ns": ("ns0", "each chunk's handshake, holding the sender's link, ns"),
    "channels": ("channels", "rings a collective splits over: a positive integer, or auto"),
    "protocol": ("choice", "simple | ll128 | ll | auto (the least modelled time)"),
    "protocols": ("table", "protocol -> {efficiency, step_ns}; a missing key keeps its default"),
}
PROTOCOL_KEYS: dict[str, tuple[str, str]] = {
    "efficiency": ("num", "share of line rate in (0, 1] (flag words travel in the data)"),
    "step_ns": ("ns0", "this protocol's handshake per chunk (on top of step_sync_ns), ns"),
}


def _channels(source: str, value: object) -> int:
    if value == AUTO:
        return AUTO_CHANNELS
    rule = "must be a positive integer or auto"
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise fail(source, "collectives.channels", value, rule)
    return integer(source, "collectives.channels", value, MAX_CODE)


def _protocol(source: str, name: str, value: object) -> ProtocolConfig:
    prefix = f"collectives.protocols.{name}"
    raw = require_mapping(source, prefix, value)
    check_keys(source, f"{prefix}.", raw, set(PROTOCOL_KEYS), frozenset(PROTOCOL_KEYS))
    neutral = NEUTRAL_PROTOCOLS[name]
    efficiency = raw.get("efficiency", neutral.efficiency)
    if "efficiency" in raw:
        efficiency = real(source, f"{prefix}.efficiency", "num", efficiency)
        if efficiency > 1:
            raise fail(
                source,
                f"{prefix}.efficiency",
                efficiency,
                "must be at most 1 (a protocol's share of the link's line rate)",
            )
    step_ns = raw.get("step_ns", neutral.step_ns)
    if "step_ns" in raw:
        step_ns = real(source, f"{prefix}.step_ns", "ns", step_ns, zero_ok=True)
    return ProtocolConfig(efficiency=efficiency, step_ns=step_ns)


def build_collectives(source: str, value: object) -> CollectivesConfig:
    """The checked ``collectives`` section; every key is optional."""
    raw = require_mapping(source, "collectives", value)
    check_keys(source, "collectives.", raw, set(COLLECTIVES_KEYS), frozenset(COLLECTIVES_KEYS))
    values: dict[str, Any] = {}
    for key in ("launch_ns", "step_sync_ns"):
        if key in raw:
            values[key] = real(source, f"collectives.{key}", "ns", raw[key], zero_ok=True)
    if "channels" in raw:
        values["channels"] = _channels(source, raw["channels"])
    if "protocol" in raw:
        values["protocol"] = _protocol_choice(source, raw["protocol"])
    if "protocols" in raw:
        table = require_mapping(source, "collectives.protocols", raw["protocols"])
        check_keys(source, "collectives.protocols.", table, set(PROTOCOLS), frozenset(PROTOCOLS))
        for name in PROTOCOLS:
            if name in table:
                values[name] = _protocol(source, name, table[name])
    return CollectivesConfig(**values)


def _protocol_choice(source: str, protocol: object) -> str:
    """``protocol``: a name, ``auto``, or a list of names the tuner chooses among (NCCL_PROTO's
    list of enabled protocols, e.g. ``[ll, simple]`` where LL128 is off), stored in
    ``PROTOCOLS`` order joined by commas."""
    if isinstance(protocol, list) and protocol and all(isinstance(x, str) for x in protocol):
        names = [x for x in PROTOCOLS if x in protocol]
        if len(names) == len(set(protocol)) == len(protocol):
            return ",".join(names)
    if isinstance(protocol, str) and protocol in PROTOCOL_CHOICES:
        return protocol
    raise fail(
        source,
        "collectives.protocol",
        protocol,
        f"must be one of {', '.join(PROTOCOL_CHOICES)}, or a list of distinct protocols the "
        "tuner chooses among (e.g. [ll, simple])",
    )


def collectives_content(c: CollectivesConfig) -> dict[str, Any]:
    """The section as the file would say it, every key at its neutral default left out
    (empty for a neutral section, which then is no part of the fingerprint)."""
    neutral = CollectivesConfig()
    out: dict[str, Any] = {}
    for key in ("launch_ns", "step_sync_ns"):
        if getattr(c, key) != getattr(neutral, key):
            out[key] = getattr(c, key)
    if c.protocol != neutral.protocol:
        out["protocol"] = c.protocol.split(",") if "," in c.protocol else c.protocol
    if c.channels != neutral.channels:
        out["channels"] = AUTO if c.channels == AUTO_CHANNELS else c.channels
    protocols: dict[str, dict[str, Any]] = {}
    for name in PROTOCOLS:
        entry, default = c.protocols(name), NEUTRAL_PROTOCOLS[name]
        changed = {
            key: getattr(entry, key)
            for key in PROTOCOL_KEYS
            if getattr(entry, key) != getattr(default, key)
        }
        if changed:
            protocols[name] = changed
    if protocols:
        out["protocols"] = protocols
    return out


def efficiency_duration_cases(
    c: CollectivesConfig, slowest_bw: Fraction, chunk_bytes: int, chunk: str
) -> list[tuple[str, float, int, str, str]]:
    """(key, value, ps, what, unit): one chunk on the slowest link under each protocol (any
    may be chosen per run), so a protocol's efficiency keeps it within one operation."""
    cases = []
    for name in PROTOCOLS:
        entry = c.protocols(name)
        ps = ps_for_bytes(chunk_bytes, slowest_bw * entry.efficiency_exact)
        what = f"sending {chunk} on the slowest link at {name}'s efficiency"
        cases.append((f"collectives.protocols.{name}.efficiency", entry.efficiency, ps, what, ""))
    return cases


def with_changes(section: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``collectives`` content with ``changes`` applied: ``protocols`` merges per protocol
    and key, and a value of None returns its key to the neutral default."""
    out = dict(section)
    for key, value in changes.items():
        old = out.get(key)
        if key == "protocols" and isinstance(value, Mapping) and isinstance(old, Mapping):
            merged = {name: dict(entry) for name, entry in old.items()}
            for name, entry in value.items():
                both = isinstance(entry, Mapping) and isinstance(merged.get(name), Mapping)
                merged[name] = {**merged[name], **entry} if both else entry
            value = merged
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out
