// Copies the non-TypeScript files the service reads at run time (the Lua scripts)
// from src/ to dist/, keeping their relative paths. Run by `npm run build`.
import { cpSync, existsSync } from 'node:fs';

if (existsSync('src')) {
  cpSync('src', 'dist', {
    recursive: true,
    filter: (from) => !/\.[a-z]+$/i.test(from) || from.endsWith('.lua'),
  });
}
