// What the lab needs from the machine, checked first so a test fails with a message that says what is
// missing rather than with a command's exit code. CI runs as root on a kernel with these features.
import { runCommand } from './command';

const TOOLS = [
  { argv: ['ip', '-V'], need: '`ip` (Debian package iproute2)' },
  { argv: ['tc', '-V'], need: '`tc` (Debian package iproute2)' },
  { argv: ['nft', '--version'], need: '`nft` (Debian package nftables; `npm run setup` installs it as root)' },
];

export async function checkRequirements(): Promise<void> {
  if (process.platform !== 'linux') throw new Error('netlab needs Linux (network namespaces, veth, nftables, tbf)');
  if (process.getuid?.() !== 0) {
    throw new Error('netlab needs root: network namespaces, veth pairs and nftables rules are root-only (CI runs the tests as root)');
  }
  for (const tool of TOOLS) {
    try {
      await runCommand(tool.argv);
    } catch (err) {
      throw new Error(`netlab needs ${tool.need}: ${(err as Error).message}`);
    }
  }
}
