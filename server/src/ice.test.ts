// TURN credentials in coturn's REST-API scheme: the username names the expiry and the volunteer, the
// password is the HMAC-SHA1 of the username under the shared secret (the vector below was computed with
// `printf '%s' '1700000000:v-abc123' | openssl dgst -sha1 -hmac 'north-wind-secret' -binary | base64`),
// expiry follows the clock, and bad URLs or a TURN server without a secret are refused.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClock } from '@tabfleet/protocol/testing';
import { checkIceUrl, IceIssuer, turnCredentials } from './ice';

const SECRET = 'north-wind-secret';

test('credentials: username "<expiry>:<volunteer id>", password base64(HMAC-SHA1(secret, username))', () => {
  assert.deepEqual(turnCredentials(SECRET, 'v-abc123', 1_700_000_000), { username: '1700000000:v-abc123', credential: '/GTuipK73qtdddsu8Glanzye+KE=' });
  assert.notEqual(turnCredentials('another-secret', 'v-abc123', 1_700_000_000).credential, '/GTuipK73qtdddsu8Glanzye+KE=');
});

test('each volunteer gets STUN urls and TURN urls with its own credentials, expiring a lifetime from now', async () => {
  const clock = new FakeClock(1_700_000_000_500);
  const turnUrls = ['turn:turn.example.org:3478?transport=udp', 'turns:turn.example.org:5349?transport=tcp'];
  const issuer = new IceIssuer({ stun: ['stun:stun.example.org:3478'], turn: turnUrls, turnSecret: SECRET, credentialLifetimeS: 600 }, clock);
  const [stun, turn] = issuer.serversFor('v-abc123');
  assert.deepEqual(stun, { urls: ['stun:stun.example.org:3478'] });
  assert.deepEqual(turn.urls, turnUrls);
  assert.equal(turn.username, '1700000600:v-abc123');
  assert.equal(turn.credential, turnCredentials(SECRET, 'v-abc123', 1_700_000_600).credential);
  assert.notEqual(issuer.serversFor('v-other')[1].credential, turn.credential);
  await clock.advance(400_000);
  assert.equal(issuer.serversFor('v-abc123')[1].username, '1700001000:v-abc123');
  assert.equal(issuer.renewAfterMs, 400_000);
  // The secret is in none of what the issuer shows.
  for (const shown of [JSON.stringify(issuer), issuer.describe(), String(issuer), JSON.stringify(issuer.serversFor('v-1'))]) assert.ok(!shown.includes(SECRET), shown);
});

test('no servers: nothing issued, nothing renewed; STUN alone needs no secret and no renewal', () => {
  const clock = new FakeClock();
  assert.equal(new IceIssuer({}, clock).active, false);
  const stunOnly = new IceIssuer({ stun: ['stun:[2001:db8::1]:3478', 'stuns:stun.example.org'] }, clock);
  assert.deepEqual([stunOnly.active, stunOnly.renews], [true, false]);
  assert.deepEqual(stunOnly.serversFor('v-1'), [{ urls: ['stun:[2001:db8::1]:3478', 'stuns:stun.example.org'] }]);
});

test('bad URLs, a TURN server without a secret and a short lifetime are refused, the secret never in the message', () => {
  for (const url of ['http://stun.example.org', 'stun:', 'stun:host:0', 'stun:host:65536', 'stun:host?transport=udp', 'turn:host', ' stun:host']) {
    assert.throws(() => checkIceUrl(url, 'stun'), /want stun:host\[:port\]/, url);
  }
  for (const url of ['turn:user:pw@host:3478', 'turn:host:3478?transport=sctp', 'stun:host:3478', 'turn:-host', 'turn:host:99999']) {
    assert.throws(() => checkIceUrl(url, 'turn'), /want turn:host\[:port\]\[\?transport=udp\|tcp\]/, url);
  }
  assert.equal(checkIceUrl('turn:127.0.0.1:3478?transport=tcp', 'turn'), 'turn:127.0.0.1:3478?transport=tcp');
  const clock = new FakeClock();
  assert.throws(() => new IceIssuer({ turn: ['turn:turn.example.org'] }, clock), /--turn needs the TURN shared secret in \$TABFLEET_TURN_SECRET/);
  assert.throws(() => new IceIssuer({ turn: ['turn:x'], turnSecret: SECRET, credentialLifetimeS: 59 }, clock), /--turn-ttl 59: want whole seconds, at least 60/);
  try {
    new IceIssuer({ turn: ['turn:bad host'], turnSecret: SECRET }, clock);
    assert.fail('accepted a bad TURN URL');
  } catch (e) {
    assert.match((e as Error).message, /^--turn "turn:bad host": want/);
    assert.ok(!(e as Error).message.includes(SECRET));
  }
});
