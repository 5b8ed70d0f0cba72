#!/usr/bin/python3
"""Medians of an interleaved A/B file (board-ab-*.txt): per size, each runner's median of the
better of out of place and in place, and per-round ratios (median and range).
Usage: /usr/bin/python3 board_ab_table.py board-ab-small.txt"""
import statistics
import sys

times = {}
runners, sizes = [], []
for line in open(sys.argv[1]):
    if line.startswith('#') or ':' not in line:
        continue
    runner, row = line.split(':', 1)
    f = row.split()
    if len(f) < 13:
        continue
    size = int(f[0])
    if int(f[8]) or int(f[12]):
        sys.exit(f'wrong elements in: {line.strip()}')
    runners += [runner] if runner not in runners else []
    sizes += [size] if size not in sizes else []
    times.setdefault((runner, size), []).append(min(float(f[5]), float(f[9])))


def ratio(a, b, size):
    if (a, size) not in times or (b, size) not in times:
        return '-'
    r = [x / y for x, y in zip(times[(a, size)], times[(b, size)])]
    return f'{statistics.median(r):.3f} ({min(r):.2f}-{max(r):.2f})'


pairs = [('after-proc', 'before-proc'), ('after-thr', 'before-thr')]
if 'mpi' in runners:
    pairs += [('after-proc', 'mpi'), ('after-thr', 'mpi'), ('before-proc', 'mpi'), ('before-thr', 'mpi')]
print('| bytes | ' + ' | '.join(f'{r} us' for r in runners) + ' | ' + ' | '.join(f'{a} / {b}' for a, b in pairs) + ' |')
print('|---:|' + '---:|' * len(runners) + '---|' * len(pairs))
for size in sizes:
    cells = [f'{statistics.median(times[(r, size)]):.2f}' for r in runners] + [ratio(a, b, size) for a, b in pairs]
    print(f'| {size} | ' + ' | '.join(cells) + ' |')
print(f'\nRounds: {len(times[(runners[0], sizes[0])])}; ratios are medians over rounds of the two runs of one round (range).')
