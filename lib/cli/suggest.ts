/** "Did you mean" for a mistyped command: the closest known name within a small edit distance. */

/** Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** The known name nearest to `given`, when it is close enough to be a typo (or `given` is its only prefix match). */
export function suggest(given: string, known: readonly string[]): string | undefined {
  const prefixed = known.filter((k) => given.length >= 2 && k.startsWith(given));
  if (prefixed.length === 1) return prefixed[0];
  const limit = Math.max(1, Math.floor(given.length / 3));
  let best: { name: string; d: number } | undefined;
  for (const k of known) {
    const d = editDistance(given, k);
    if (d <= limit && (!best || d < best.d)) best = { name: k, d };
  }
  return best?.name;
}
