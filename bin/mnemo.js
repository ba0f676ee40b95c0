#!/usr/bin/env node
// The `mnemo` command. Mnemo runs its TypeScript sources through tsx (no build step, so what
// runs is exactly what is checked in); this shim registers tsx and hands over to the CLI.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
