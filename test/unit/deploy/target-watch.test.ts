import { describe, expect, it } from 'vitest';
import { parseBlockStat } from '../../../installer/deploy/target-watch.js';

describe('parseBlockStat', () => {
  it('reads reads and writes completed and the requests in flight (Documentation/block/stat.rst)', () => {
    expect(parseBlockStat('    1520        0   110266      377    23460     1234  8765432    99872        3    86232   100250        0        0        0        0\n')).toEqual({ completed: 1520 + 23460, inFlight: 3 });
  });
  it('refuses what is not a stat line', () => {
    expect(parseBlockStat('')).toBeUndefined();
    expect(parseBlockStat('1 2 3')).toBeUndefined();
    expect(parseBlockStat('a b c d e f g h i j k')).toBeUndefined();
  });
});
