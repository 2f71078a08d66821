"""Python `re` with AWS's Athena pattern over the same file (called by the access_log_parse bench)."""
import re
import sys
import time

ATHENA = r'([^ ]*) ([^ ]*) \[(.*?)\] ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ("[^"]*"|-) (-|[0-9]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ("[^"]*"|-) ([^ ]*)(?: ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*))?.*$'

path = sys.argv[1]
with open(path, encoding="utf-8") as f:
    text = f.read()
pat = re.compile(ATHENA)
t = time.perf_counter()
rows = []
for line in text.splitlines():
    m = pat.match(line)
    if m:
        rows.append(m.groups())
secs = time.perf_counter() - t
n = len(rows)
mb = len(text.encode()) / 1e6
print(f"{'python re (Athena) -> tuples':<34} {n / secs:>10.0f} lines/s {mb / secs:>8.1f} MB/s  ({n} lines, {mb:.1f} MB, {secs:.2f}s)")
