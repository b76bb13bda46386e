/**
 * NTP servers that do not answer, or answer unsynchronised, are warnings: Harvester's console asks
 * the operator to confirm them ("Failed to reach NTP servers: %v. Press Enter again to use current
 * configuration anyway, ...", harvester/harvester-installer pkg/console/install_panels.go) and its
 * automatic mode does not check at all, so an install goes on; but a node without time sync gets
 * "certificate is not yet valid" when it joins. Pure, over the probes of ../ntp.ts.
 */
import type { NtpProbe } from '../ntp.js';
import type { PreflightCheck } from '../report.js';

export function checkNtpServers(probes: readonly NtpProbe[]): PreflightCheck[] {
  return probes.map((p): PreflightCheck => {
    const base = { id: 'ntp.server', title: 'NTP server answers', subject: p.server, threshold: 'an NTP reply within 5 s (UDP)', skippable: true };
    if (!p.answer) {
      return {
        ...base,
        result: 'warn',
        measured: 'no answer',
        message: `Failed to reach NTP servers: ${p.server}: ${p.problem}`,
        whatToDo: 'Check the name, the port and that UDP 123 is allowed from the management network; or set os.ntp_servers to servers that answer.',
      };
    }
    const a = p.answer;
    const unsynchronised = a.leap === 3 || a.stratum === 0 || a.stratum > 15;
    if (unsynchronised) {
      return {
        ...base,
        result: 'warn',
        measured: `answered from ${a.address}, stratum ${a.stratum}, leap ${a.leap}`,
        message: `NTP server ${p.server} answers but is not synchronised itself (stratum ${a.stratum}${a.leap === 3 ? ', leap indicator 3' : ''}): systemd-timesyncd will not take its time.`,
        whatToDo: 'Point os.ntp_servers at a server that is synchronised (stratum 1-15), or fix its upstream.',
      };
    }
    return { ...base, result: 'pass', measured: `answered from ${a.address}, stratum ${a.stratum}`, message: `NTP server ${p.server} answers (stratum ${a.stratum}).`, whatToDo: '' };
  });
}
