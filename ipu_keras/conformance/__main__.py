"""`python -m ipu_keras.conformance [NAME_FILTER]`: the catalogue's conformance table."""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from ipu_keras.conformance.catalogue import catalogue  # noqa: E402
from ipu_keras.conformance.runner import run_item  # noqa: E402


def main(argv):
    wanted = argv[0].lower() if argv else ""
    items = [i for i in catalogue() if wanted in i.name.lower()]
    results = []
    for item in items:
        result = run_item(item)
        results.append(result)
        print(f"{result.group:26s} {result.name:40s} {result.status:12s} {result.detail}",
              flush=True)
    matching = sum(r.status == "ok" for r in results)
    print(f"{matching}/{len(results)} catalogue items match TensorFlow")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
