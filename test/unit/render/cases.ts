/** The golden cases: configs as config would hand them over (canonical camelCase), plus facts and seeds. */
import type { HarvesterConfig } from '../../../config/types.js';
import { readFileSync } from 'node:fs';
import type { ImageFacts, RenderFacts, RenderSeeds } from '../../../installer/render/types.js';
import type { HarvesterTemplates } from '../../../installer/render/harvester-templates.js';

export interface RenderCase {
  name: string;
  config: HarvesterConfig;
  facts: RenderFacts;
  seeds: RenderSeeds;
  /** Secret values that must appear only in 0600 files. */
  secrets: string[];
}

export const TOKEN = 'K10-golden-token::server:0123456789abcdef';
export const PASSWORD = 'Golden-p4ss!';
export const REGISTRY_PASSWORD = 'reg-s3cret-pw';
export const WEBHOOK_PASSWORD = 'hook-s3cret-pw';
export const WEBHOOK_BEARER = 'Bearer hook-bearer-s3cret';
export const ADMIN_PASSWORD = 'correct horse battery staple';
/** A token with every YAML-special character the token rule allows. */
export const SPECIAL_TOKEN = `K10-sp3cial::server:"dq" 'sq' #hash & *star ! %pct @at \\back {brace} [list] |pipe >gt ,comma`;

/** A release as Harvester's build writes it (values invented for the tests). */
export const RELEASE_TEXT = `harvester: v1.8.1
harvesterChart: 1.8.1
installer: 8064e123
os: Harvester v1.8.1
kubernetes: v1.35.6+rke2r1
rancher: v2.14.2
monitoringChart: 108.0.0+up77.9.1-rancher.11
loggingChart: 108.0.0+up4.10.0-rancher.14
loggingChartHarvesterEventRouter: rancher/harvester-eventrouter:v1.8.1
kubevirt: v1.6.0-150700.3.11.1
minUpgradableVersion: 'v1.7.0'
rancherDependencies:
  fleet:
    chart: 108.0.1+up0.14.1
    app: 0.14.1
`;
export const RELEASE_SOURCE = '/src/etc/harvester-release.yaml';

/**
 * Harvester's build-time templates as its installer binary carries them: rancherd-22-addons.yaml
 * generated from harvester/addons with its version_info, and rancherd-12-monitoring-dashboard.yaml
 * (test/fixtures/harvester-templates/README.md says from which commits).
 */
export const HARVESTER_TEMPLATES_DIR = new URL('../../fixtures/harvester-templates/', import.meta.url);
export const TEMPLATES: HarvesterTemplates = {
  addons: readFileSync(new URL('rancherd-22-addons.yaml', HARVESTER_TEMPLATES_DIR), 'utf8'),
  dashboards: readFileSync(new URL('rancherd-12-monitoring-dashboard.yaml', HARVESTER_TEMPLATES_DIR), 'utf8'),
  source: '/src/usr/bin/harvester-installer',
};

export const RANCHERD_IMAGE: ImageFacts = {
  templates: TEMPLATES,
  bootstrapper: 'rancherd',
  why: 'the image carries rancherd (/usr/bin/rancherd, /usr/lib/systemd/system/rancherd.service): rancherd bootstraps RKE2, Rancher and Harvester',
  release: {
    source: RELEASE_SOURCE,
    metadata: {
      harvester: 'v1.8.1',
      harvesterChart: '1.8.1',
      installer: '8064e123',
      os: 'Harvester v1.8.1',
      kubernetes: 'v1.35.6+rke2r1',
      rancher: 'v2.14.2',
      monitoringChart: '108.0.0+up77.9.1-rancher.11',
      loggingChart: '108.0.0+up4.10.0-rancher.14',
      loggingChartHarvesterEventRouter: 'rancher/harvester-eventrouter:v1.8.1',
      kubevirt: 'v1.6.0-150700.3.11.1',
      minUpgradableVersion: 'v1.7.0',
      rancherDependencies: { fleet: { chart: '108.0.1+up0.14.1', app: '0.14.1' } },
    },
  },
};

const nics = [
  { name: 'eno1', mac: '52:54:00:aa:00:01' },
  { name: 'eno2', mac: '52:54:00:aa:00:02' },
  { name: 'ens3', mac: '52:54:00:aa:00:03' },
];
const facts: RenderFacts = { cpuCount: 8, nics };
const seeds: RenderSeeds = { seed: 'golden-seed' };
const keys = ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGoldenKeyForTestsOnly0000000000000000 ops@example', 'github:alice'];

const createBase = (): HarvesterConfig => ({
  schemeVersion: 1,
  token: TOKEN,
  os: { password: PASSWORD, sshAuthorizedKeys: keys, ntpServers: ['0.pool.ntp.org', '1.pool.ntp.org'], dnsNameservers: ['192.168.122.1'], modules: ['kvm', 'vhost_net'] },
  install: {
    mode: 'create',
    device: '/dev/vda',
    vip: '192.168.122.100',
    vipMode: 'static',
    managementInterface: { interfaces: [{ name: 'eno1' }], method: 'dhcp' },
  },
});

const joinBase = (): HarvesterConfig => ({
  schemeVersion: 1,
  serverUrl: 'https://192.168.122.100:443',
  token: TOKEN,
  os: { password: PASSWORD, sshAuthorizedKeys: keys, modules: ['kvm', 'vhost_net'] },
  install: { mode: 'join', device: '/dev/vda', managementInterface: { interfaces: [{ hwAddr: '52:54:00:aa:00:02' }], method: 'dhcp' } },
});

export const CASES: RenderCase[] = [
  {
    name: 'create-dhcp',
    config: { ...createBase(), sans: ['harvester.example.com', '192.168.122.100'] },
    facts: { ...facts, dhcpHostname: 'rancher' },
    seeds,
    secrets: [TOKEN, PASSWORD],
  },
  {
    name: 'create-static',
    config: (() => {
      const c = createBase();
      c.os = {
        ...c.os,
        hostname: 'node1',
        labels: { 'topology.kubernetes.io/zone': 'zone-a' },
        sysctls: { 'vm.max_map_count': '262144', 'net.ipv6.conf.all.disable_ipv6': '1' },
        modules: ['kvm', 'vhost_net', 'nvme_tcp'],
        writeFiles: [
          { path: '/etc/motd', content: 'welcome\n', permissions: '0644', owner: 'root:root' },
          { path: '/etc/b64.txt', content: Buffer.from('hello base64\n').toString('base64'), encoding: 'b64', permissions: '0640' },
          { path: '/etc/gz.txt', content: 'H4sIAAAAAAAAA8tIzcnJVyjPL8pJAQCFEUoNCwAAAA==', encoding: 'gz+b64', permissions: 'rw-r--r--' },
          { path: '/etc/noperm.txt', content: 'x' },
        ],
        afterInstallChrootCommands: ['echo installed > /etc/hv-installed'],
        sshd: { sftp: true, disablePasswordAuth: true },
        externalStorageConfig: { enabled: true, multiPathConfig: { blacklist: [{ vendor: 'IET', product: 'VIRTUAL-DISK' }], blacklistWwids: ['3600508b1001c0000000000000000'], blacklistExceptions: [{ vendor: 'NETAPP', product: 'LUN' }], blacklistExceptionWwids: ['3600a0980000000000000001'] } },
        additionalKernelArguments: 'console=ttyS0 quiet',
      };
      c.install = {
        ...c.install,
        managementInterface: { interfaces: [{ name: 'eno1' }], method: 'static', ip: '192.168.122.10', subnetMask: '255.255.255.0', gateway: '192.168.122.1' },
        clusterPodCidr: '10.60.0.0/16',
        clusterServiceCidr: '10.61.0.0/16',
        clusterDns: '10.61.0.10',
        harvester: { storageClass: { replicaCount: 5 }, longhorn: { defaultSettings: { guaranteedInstanceManagerCPU: 20, storageReservedPercentageForDefaultDisk: 50 } } },
      };
      return c;
    })(),
    facts,
    seeds,
    secrets: [TOKEN, PASSWORD],
  },
  {
    name: 'create-vlan-bond-mtu',
    config: (() => {
      const c = createBase();
      c.os = { ...c.os, hostname: 'node-bond', externalStorageConfig: { enabled: true, multiPathConfig: [{ vendor: 'DELL', product: 'MD32xx' }] } };
      c.install = {
        ...c.install,
        vipMode: 'dhcp',
        vipHwAddr: '52:54:00:EE:00:01',
        managementInterface: {
          interfaces: [{ name: 'eno1' }, { hwAddr: '52:54:00:aa:00:02' }],
          method: 'static',
          ip: '10.10.100.10',
          subnetMask: '255.255.252.0',
          gateway: '10.10.100.1',
          bondOptions: { mode: '802.3ad', miimon: '100', lacp_rate: 'fast', xmit_hash_policy: 'layer3+4' },
          mtu: 9000,
          vlanId: 100,
        },
      };
      return c;
    })(),
    facts,
    seeds,
    secrets: [TOKEN, PASSWORD],
  },
  {
    name: 'join',
    config: (() => {
      const c = joinBase();
      c.os = { ...c.os, password: '$6$givenSalt$3G0SkJ8Rkzv4A2nd4eWNSPvyP2v3l0QdDTp0vYk6/2gq2Vvo8lN0r8o2rX6tQCq0ZtF2QeS1cI3m6P8gqC5.1', ntpServers: ['ntp.example.com'] };
      c.install = { ...c.install, cordoned: true };
      return c;
    })(),
    facts: { ...facts, dhcpHostname: 'dhcp-node-7' },
    seeds,
    secrets: [TOKEN],
  },
  {
    name: 'join-witness',
    config: (() => {
      const c = joinBase();
      c.install = { ...c.install, role: 'witness' };
      return c;
    })(),
    facts,
    seeds,
    secrets: [TOKEN, PASSWORD],
  },
  {
    name: 'join-worker-data-disk',
    config: (() => {
      const c = joinBase();
      c.os = { ...c.os, persistentStatePaths: ['/var/lib/custom', '/opt/extra/'] };
      c.install = { ...c.install, role: 'worker', dataDisk: '/dev/sdb', managementInterface: { interfaces: [{ name: 'ens3' }], method: 'dhcp', mtu: 9000 } };
      return c;
    })(),
    facts,
    seeds,
    secrets: [TOKEN, PASSWORD],
  },
  {
    name: 'create-no-data-partition',
    config: (() => {
      const c = createBase();
      c.install = { ...c.install, forceMbr: true };
      return c;
    })(),
    facts,
    seeds,
    secrets: [TOKEN, PASSWORD],
  },
  {
    name: 'join-proxy',
    config: (() => {
      const c = joinBase();
      c.os = { ...c.os, environment: { http_proxy: 'http://proxy.example.com:3128', https_proxy: 'http://proxy.example.com:3128', no_proxy: 'localhost,127.0.0.1,0.0.0.0,10.0.0.0/8,192.168.0.0/16,.svc,.cluster.local' } };
      return c;
    })(),
    facts,
    seeds,
    secrets: [TOKEN, PASSWORD],
  },
  {
    name: 'create-registries-auth',
    config: (() => {
      const c = createBase();
      c.systemSettings = {
        'containerd-registry': JSON.stringify({
          Mirrors: { 'docker.io': { Endpoints: ['https://mirror.example.com:5000'], Rewrites: { '^rancher/(.*)': 'mirror/rancher-images/$1' } } },
          Configs: { 'mirror.example.com:5000': { Auth: { Username: 'puller', Password: REGISTRY_PASSWORD }, TLS: { CAFile: '/etc/pki/trust/anchors/mirror-ca.pem', InsecureSkipVerify: false } } },
        }),
      };
      c.install = {
        ...c.install,
        webhooks: [
          { event: 'SUCCEEDED', method: 'POST', url: 'https://hooks.example.com/done', basicAuth: { user: 'hook', password: WEBHOOK_PASSWORD } },
          { event: 'FAILED', method: 'POST', url: 'https://hooks.example.com/failed', headers: { Authorization: [WEBHOOK_BEARER] } },
        ],
      };
      return c;
    })(),
    facts,
    seeds,
    secrets: [TOKEN, PASSWORD, REGISTRY_PASSWORD, WEBHOOK_PASSWORD, WEBHOOK_BEARER],
  },
  {
    name: 'install-only',
    config: (() => {
      const c = createBase();
      c.install = { mode: 'install', device: '/dev/vda' };
      delete c.token;
      return c;
    })(),
    facts,
    seeds,
    secrets: [PASSWORD],
  },
  {
    name: 'rancherd-create',
    config: (() => {
      const c = createBase();
      c.sans = ['harvester.example.com'];
      c.systemSettings = {
        'log-level': 'debug',
        // A value with Go-template braces: yip must write it unchanged.
        'ui-index': 'https://ui.example.com/{{index}}/index.html',
        'containerd-registry': JSON.stringify({ Mirrors: { 'docker.io': { Endpoints: ['https://mirror.example.com:5000'] } }, Configs: { 'mirror.example.com:5000': { Auth: { Username: 'puller', Password: REGISTRY_PASSWORD } } } }),
        // Replaced by the value built from os.ntp_servers, as Harvester does.
        'ntp-servers': '{"ntpServers":["ignored.example.com"]}',
      };
      c.kubeovnChartVersion = '1.16.2';
      c.install = {
        ...c.install,
        adminPassword: ADMIN_PASSWORD,
        addons: { rancher_monitoring: { enabled: true }, rancher_logging: { enabled: false }, kubeovn_operator: { enabled: false } },
        harvester: { storageClass: { replicaCount: 2 }, longhorn: { defaultSettings: { guaranteedInstanceManagerCPU: 10 } } },
      };
      return c;
    })(),
    facts: { ...facts, arch: 'amd64', image: RANCHERD_IMAGE },
    seeds,
    secrets: [TOKEN, PASSWORD, ADMIN_PASSWORD, REGISTRY_PASSWORD],
  },
  {
    name: 'rancherd-create-arm64',
    config: (() => {
      const c = createBase();
      c.os = { ...c.os, ntpServers: [] };
      // The config's versions win over the media's, as in Harvester.
      c.runtimeVersion = 'v1.34.9+rke2r1';
      c.rancherVersion = 'v2.13.4';
      c.install = {
        ...c.install,
        vipMode: 'dhcp',
        vipHwAddr: '52:54:00:EE:00:01',
        adminPassword: '$pbkdf2-sha3-512$i=210000$AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=$ZGGlY8m6lF8NsyWTwTJXVbCo0YDQyRzsxGpLEuqm9ms=',
      };
      return c;
    })(),
    facts: { ...facts, arch: 'arm64', image: RANCHERD_IMAGE },
    seeds,
    secrets: [TOKEN, PASSWORD],
  },
  {
    name: 'rancherd-join',
    config: (() => {
      const c = joinBase();
      c.token = SPECIAL_TOKEN;
      c.os = { ...c.os, labels: { 'topology.kubernetes.io/zone': 'zone-b' } };
      c.install = { ...c.install, cordoned: true, role: 'management' };
      return c;
    })(),
    facts: { ...facts, image: RANCHERD_IMAGE },
    seeds,
    secrets: [SPECIAL_TOKEN, PASSWORD],
  },
  {
    name: 'rancherd-join-witness',
    config: (() => {
      const c = joinBase();
      c.install = { ...c.install, role: 'witness' };
      return c;
    })(),
    facts: { ...facts, image: RANCHERD_IMAGE },
    seeds,
    secrets: [TOKEN, PASSWORD],
  },
  {
    name: 'rancherd-install-only',
    config: (() => {
      const c = createBase();
      c.install = { mode: 'install', device: '/dev/vda', adminPassword: ADMIN_PASSWORD };
      delete c.token;
      return c;
    })(),
    facts: { ...facts, image: RANCHERD_IMAGE },
    seeds,
    secrets: [PASSWORD, ADMIN_PASSWORD],
  },
];
