/**
 * The Prometheus text exposition format (version 0.0.4), which both the hvpxe /metrics endpoint and
 * node_exporter's textfile collector read: # HELP, # TYPE, then `name{label="value"} number` lines.
 */

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export interface Sample {
  labels?: Record<string, string>;
  value: number;
}

export interface MetricFamily {
  name: string;
  help: string;
  type: 'counter' | 'gauge';
  samples: Sample[];
}

/** A label value escaped as the format requires: backslash, double quote and newline. */
function labelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function number(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

export function formatMetrics(families: MetricFamily[]): string {
  const out: string[] = [];
  for (const f of families) {
    out.push(`# HELP ${f.name} ${f.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) {
      const labels = Object.entries(s.labels ?? {});
      out.push(`${f.name}${labels.length ? `{${labels.map(([k, v]) => `${k}="${labelValue(v)}"`).join(',')}}` : ''} ${number(s.value)}`);
    }
  }
  return out.join('\n') + '\n';
}

/** A counter keyed by its label values (one family). */
export class LabelledCounter<K extends string> {
  private readonly values = new Map<string, { labels: Record<K, string>; value: number }>();
  inc(labels: Record<K, string>, by = 1): void {
    const key = JSON.stringify(Object.entries(labels).sort());
    const cur = this.values.get(key);
    if (cur) cur.value += by;
    else this.values.set(key, { labels, value: by });
  }
  samples(): Sample[] {
    return [...this.values.values()].map((v) => ({ labels: v.labels, value: v.value }));
  }
}
