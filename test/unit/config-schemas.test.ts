/**
 * The settings' JSON schemas (src/config/config.ts): each compiles (they are compiled
 * on first read, so a broken one would show only when that setting is given), and each
 * is valid JSON Schema (config.ts's Ajv compiles them without checking that).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Ajv } from 'ajv';
import { schemaFor, validatorFor } from '../../src/config/config.js';
import { SETTINGS, type SettingKey } from '../../src/config/settings.js';

test('every setting\'s schema compiles (they are compiled on first read, so a broken one would show only when that setting is given)', () => {
  const keys = Object.keys(SETTINGS) as SettingKey[];
  assert.ok(keys.length > 40);
  for (const key of keys) assert.doesNotThrow(() => validatorFor(key), `${SETTINGS[key].env}'s schema`);
});

test('every setting\'s schema is valid JSON Schema (config.ts compiles them without that check)', () => {
  const meta = new Ajv();
  assert.equal(meta.validateSchema({ type: 'integer', minimum: 'one' }), false, 'the check can fail');
  for (const key of Object.keys(SETTINGS) as SettingKey[]) {
    assert.equal(meta.validateSchema(schemaFor(SETTINGS[key])), true, `${SETTINGS[key].env}: ${meta.errorsText()}`);
  }
});
