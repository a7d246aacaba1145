"""A seeded synthetic anthology, shaped like ``data/``, at a scale factor.

Scale 1 is the size of the real anthology: 449 practices, 750 papers, 60 ADRs, 28 topics and the
registry. Records follow the real data's mix: about 70% Active, 20% Proposed and 10% Rejected practices,
every rejection with a reason that names other records, version chains (about 17% of practices at v2,
3% at v3), ADR supersession chains, one or two citations per practice, and a few practices without a
summary. The same seed and scale always give byte-identical files.

    python -m benchmarks.generate --scale 1 --out /tmp/anthology-1
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from sotakg.records.schema import Record, dump_record, record_path  # noqa: E402

PRACTICES_AT_SCALE_1 = 449
PAPERS_AT_SCALE_1 = 750
ADRS_AT_SCALE_1 = 60

TOPICS = (
    "distributed-optimization", "data-quality", "evaluation", "training-stability", "hyperparameter-tuning",
    "regularization", "architecture-design", "attention-efficiency", "inference-serving", "quantization",
    "pruning-distillation", "memory-efficiency", "data-augmentation", "tokenization", "fine-tuning",
    "reinforcement-learning", "reproducibility", "experiment-tracking", "monitoring", "safety-alignment",
    "interpretability", "fairness", "privacy", "retrieval-augmentation", "multimodal", "benchmarking",
    "deployment", "hardware-efficiency",
)  # fmt: skip

# fmt: off
_VERBS = ("Use", "Prefer", "Avoid", "Measure", "Schedule", "Cache", "Shard", "Clip", "Warm up", "Checkpoint",
          "Validate", "Log", "Compress", "Tune", "Freeze", "Balance", "Overlap", "Pin", "Profile", "Batch")
_OBJECTS = ("gradient accumulation", "the learning rate", "activation memory", "optimizer state",
            "data loaders", "evaluation sets", "mixed precision", "attention kernels", "the tokenizer",
            "checkpoints",
            "pipeline stages", "all-reduce buckets", "label noise", "calibration data", "KV caches",
            "random seeds", "warm-up steps", "weight decay", "held-out splits", "serving replicas")
_CONDITIONS = ("for large batches", "under memory pressure", "before scaling out", "when loss spikes",
               "across nodes", "on long sequences", "for small datasets", "at inference time",
               "when fine-tuning", "per layer", "with a fixed budget", "on heterogeneous hardware")
_SURNAMES = ("Chen", "Huang", "Jiang", "Mohan", "Rajbhandari", "Shoeybi", "Narayanan", "Dean", "Li", "Smith",
             "Kingma", "Vaswani", "Goyal", "You", "Micikevicius", "Zhao", "Dao", "Hoffmann", "Kaplan", "Wei")
# fmt: on


def _title(rng: random.Random) -> str:
    return f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_CONDITIONS)}"


def _ids(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{n:03d}" for n in range(1, count + 1)]


def anthology_records(scale: float, seed: int = 1) -> list[Record]:
    """Every record of a synthetic anthology at ``scale`` (1 = the real anthology's size)."""
    rng = random.Random(seed)
    practice_ids = _ids("SOTA", max(1, round(PRACTICES_AT_SCALE_1 * scale)))
    paper_ids = _ids("LIT", max(1, round(PAPERS_AT_SCALE_1 * scale)))
    # ADR-026 and ADR-059 govern the topic scheme, so there are always at least 60.
    adr_ids = _ids("ADR", max(ADRS_AT_SCALE_1, round(ADRS_AT_SCALE_1 * scale)))
    records: list[Record] = []

    papers = []
    for paper_id in paper_ids:
        year = rng.randint(2010, 2024)
        fields: dict[str, object] = {"id": paper_id}
        if rng.random() < 0.6:
            fields["title"] = _title(rng).capitalize()
        fields["authors"] = f"{rng.choice(_SURNAMES)} et al."
        fields["year"] = year
        if rng.random() < 0.7:
            fields["arxiv"] = f"{year % 100:02d}{rng.randint(1, 12):02d}.{rng.randint(0, 99999):05d}"
            if rng.random() < 0.5:
                fields["url"] = f"https://arxiv.org/abs/{fields['arxiv']}"
        elif rng.random() < 0.8:
            fields["url"] = f"https://proceedings.example.org/{year}/{paper_id.lower()}"
        if rng.random() < 0.5:
            fields["topic"] = rng.choice(TOPICS)
        papers.append(Record("paper", paper_id, fields))

    topic_sizes = dict.fromkeys(TOPICS, 0)
    practices = []
    for practice_id in practice_ids:
        roll = rng.random()
        status = "Active" if roll < 0.7 else "Proposed" if roll < 0.9 else "Rejected"
        version_roll = rng.random()
        version = 1 if version_roll < 0.8 else 2 if version_roll < 0.97 else 3
        topic = rng.choice(TOPICS)
        topic_sizes[topic] += 1
        cites = sorted(rng.sample(paper_ids, k=min(len(paper_ids), rng.choice((1, 1, 2)))))
        fields = {"id": practice_id, "version": version, "title": _title(rng)}
        if rng.random() < 0.97:
            paper = rng.choice(cites)
            fields["summary"] = f"{rng.choice(_SURNAMES)} et al. ({rng.randint(2010, 2024)}), {paper}: evidence."
        fields["status"] = status
        if status == "Rejected":
            named = sorted({rng.choice(practice_ids), rng.choice(cites + [rng.choice(adr_ids)])} - {practice_id})
            named = named or [cites[0]]
            fields["reason"] = f"superseded by what {' and '.join(named)} state with an owner and a measurement"
            fields["reason_names"] = named
        fields["cites"] = cites
        fields["topic"] = topic
        practices.append(Record("practice", practice_id, fields))

    adrs = []
    superseded_by: dict[str, str] = {}
    for index, adr_id in enumerate(adr_ids[:-1]):
        if adr_id not in ("ADR-026", "ADR-059") and rng.random() < 0.3:
            later = adr_ids[rng.randint(index + 1, min(len(adr_ids) - 1, index + 8))]
            superseded_by[adr_id] = later
    supersedes: dict[str, list[str]] = {}
    for old, new in superseded_by.items():
        supersedes.setdefault(new, []).append(old)
    for adr_id in adr_ids:
        fields = {"id": adr_id}
        if rng.random() < 0.5:
            fields["title"] = f"Decision on {rng.choice(_OBJECTS)}"
        if adr_id in superseded_by:
            fields["status"] = "Superseded"
        elif rng.random() < 0.4:
            fields["status"] = "Accepted"
        fields["summary"] = f"How the anthology handles {rng.choice(_OBJECTS)} ({adr_id})."
        if adr_id in supersedes:
            fields["supersedes"] = sorted(supersedes[adr_id])
        if adr_id in superseded_by:
            fields["superseded_by"] = superseded_by[adr_id]
        adrs.append(Record("adr", adr_id, fields))

    topics = [
        Record("topic", slug, {
            "id": slug,
            "label": slug.replace("-", " ").capitalize(),
            "scope": f"practices about {slug.replace('-', ' ')}.",
            "declared_size": topic_sizes[slug],
        })
        for slug in TOPICS
    ]  # fmt: skip
    registry = Record("registry", "registry", {
        "title": "Topics",
        "description": "The twenty-eight kinds of claim this anthology files against (ADR-026).",
        "declared_size": len(practice_ids),
        "governed_by": ["ADR-026", "ADR-059"],
    })  # fmt: skip
    records.extend(practices)
    records.extend(papers)
    records.extend(adrs)
    records.extend(topics)
    records.append(registry)
    return records


def generate(out: Path, scale: float, seed: int = 1) -> dict[str, int]:
    """Write the synthetic anthology into the data folder ``out`` (replacing it); return counts by kind."""
    if out.exists():
        shutil.rmtree(out)
    counts: dict[str, int] = {}
    made: set[Path] = set()
    for record in anthology_records(scale, seed):
        path = record_path(out, record)
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_text(dump_record(record), encoding="utf-8")
        counts[record.kind] = counts.get(record.kind, 0) + 1
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a synthetic anthology data folder.")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    print(generate(args.out, args.scale, args.seed))


if __name__ == "__main__":
    main()
