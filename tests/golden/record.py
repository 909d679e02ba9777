"""Write the golden plans and templates: `python -m tests.golden.record`.

Run it only when a change is meant to change plans or templates; the diff then shows how.
"""

from __future__ import annotations

import json
import shutil

from tests.golden.cases import GOLDEN_DIR, SYNTHS, plan_documents, synth_files


def main() -> None:
    shutil.rmtree(GOLDEN_DIR, ignore_errors=True)
    for name in SYNTHS:
        folder = GOLDEN_DIR / "synth" / name
        folder.mkdir(parents=True)
        for file, text in synth_files(name).items():
            (folder / file).write_text(text, encoding="utf-8")
    plans = plan_documents()
    (GOLDEN_DIR / "plans.json").write_text(json.dumps(plans, indent=1, sort_keys=True),
                                           encoding="utf-8")  # fmt: skip
    print(f"recorded {len(SYNTHS)} synths and {len(plans)} plans in {GOLDEN_DIR}")


if __name__ == "__main__":
    main()
