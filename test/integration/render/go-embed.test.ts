/**
 * Harvester's templates read from a binary Go itself built, as harvester-installer is built
 * (`//go:embed templates/*`, CGO_ENABLED=0, -extldflags -static: harvester/harvester-installer
 * scripts/build), and rendered as Go's text/template renders them: the program also renders the
 * addon template over a config the way pkg/util/template.go RenderTemplate does, and hvinstall's
 * rendering must match it byte for byte. Needs Debian's golang-go (.ci/apt-packages.txt); builds
 * offline (the program uses the standard library only).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { renderAddons, templatesInBinary } from '../../../installer/render/harvester-templates.js';
import { imageFactsOf } from '../../../installer/steps/image-facts.js';
import type { HarvesterConfig } from '../../../config/types.js';
import { HARVESTER_TEMPLATES_DIR, TEMPLATES } from '../../unit/render/cases.js';

const PROGRAM = `package main

import (
	"embed"
	"encoding/json"
	"os"
	"text/template"
)

//go:embed templates/*
var templFS embed.FS

type Addon struct {
	Enabled       bool   \`json:"enabled,omitempty"\`
	ValuesContent string \`json:"valuesContent,omitempty"\`
}

type Install struct {
	Vip    string           \`json:"vip,omitempty"\`
	Addons map[string]Addon \`json:"addons,omitempty"\`
}

type HarvesterConfig struct {
	Install \`json:"install,omitempty"\`
}

func main() {
	var c HarvesterConfig
	if err := json.NewDecoder(os.Stdin).Decode(&c); err != nil {
		panic(err)
	}
	b, err := templFS.ReadFile("templates/rancherd-22-addons.yaml")
	if err != nil {
		panic(err)
	}
	t := template.Must(template.New("").Parse(string(b)))
	if err := t.Execute(os.Stdout, &c); err != nil {
		panic(err)
	}
}
`;

let dir: string;
let binary: string;

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'hv-goembed-'));
  const src = path.join(dir, 'src');
  mkdirSync(path.join(src, 'templates'), { recursive: true });
  for (const f of ['rancherd-22-addons.yaml', 'rancherd-12-monitoring-dashboard.yaml']) copyFileSync(new URL(f, HARVESTER_TEMPLATES_DIR), path.join(src, 'templates', f));
  writeFileSync(path.join(src, 'main.go'), PROGRAM);
  writeFileSync(path.join(src, 'go.mod'), 'module example.invalid/harvester-installer-standin\n\ngo 1.19\n');
  binary = path.join(dir, 'harvester-installer');
  // A cache shared between runs: the standard library is compiled once.
  const env = { ...process.env, HOME: dir, GOCACHE: path.join(os.tmpdir(), 'hvinstall-test-gocache'), GOPATH: path.join(dir, 'gopath'), GOFLAGS: '-mod=mod', GOPROXY: 'off', GOTOOLCHAIN: 'local', CGO_ENABLED: '0' };
  execFileSync('go', ['build', '-ldflags', '-s -extldflags -static', '-o', binary, '.'], { cwd: src, env, stdio: 'pipe', timeout: 300_000 });
}, 320_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const goRender = (config: HarvesterConfig): string => execFileSync(binary, { input: JSON.stringify(config), encoding: 'utf8' });

describe("Harvester's templates in a Go-built harvester-installer", () => {
  it('templatesInBinary reads both embedded templates exactly', () => {
    const t = templatesInBinary(readFileSync(binary), binary)!;
    expect(t.addons).toBe(TEMPLATES.addons);
    expect(t.dashboards).toBe(TEMPLATES.dashboards);
  });

  const configs: Array<[string, HarvesterConfig]> = [
    ['no addons key, no VIP', { schemeVersion: 1, install: { mode: 'create' } }],
    ['some enabled, one explicitly disabled, a VIP', { schemeVersion: 1, install: { mode: 'create', vip: '10.0.0.9', addons: { rancher_monitoring: { enabled: true }, descheduler: { enabled: true }, rancher_logging: { enabled: false } } } }],
    ['every addon enabled', { schemeVersion: 1, install: { mode: 'create', vip: '192.168.1.5', addons: Object.fromEntries(['harvester_vm_import_controller', 'harvester_pcidevices_controller', 'rancher_logging', 'rancher_monitoring', 'harvester_seeder', 'nvidia_driver_toolkit', 'kubeovn_operator', 'descheduler'].map((k) => [k, { enabled: true }])) } }],
    ['an addon key the template does not know', { schemeVersion: 1, install: { mode: 'create', addons: { not_an_addon: { enabled: true } } } }],
  ];
  it.each(configs)('renderAddons matches Go text/template byte for byte: %s', (_name, config) => {
    expect(renderAddons(config, TEMPLATES).text).toBe(goRender(config));
  });

  it('imageFactsOf reads the templates from the binary inside a squashfs OS image', async () => {
    const tree = path.join(dir, 'tree');
    for (const [p, content] of Object.entries({ 'usr/bin/rancherd': '#!/bin/sh\n', 'usr/lib/systemd/system/rancherd.service': '[Service]\n' })) {
      mkdirSync(path.dirname(path.join(tree, p)), { recursive: true });
      writeFileSync(path.join(tree, p), content);
    }
    copyFileSync(binary, path.join(tree, 'usr/bin/harvester-installer'));
    const squashfs = path.join(dir, 'os.squashfs');
    execFileSync('mksquashfs', [tree, squashfs, '-noappend', '-quiet']);
    const facts = await imageFactsOf({ kind: 'squashfs', path: squashfs });
    expect(facts.bootstrapper).toBe('rancherd');
    expect(facts.templates).toEqual({ addons: TEMPLATES.addons, dashboards: TEMPLATES.dashboards, source: `${squashfs}:/usr/bin/harvester-installer` });
  });
});
