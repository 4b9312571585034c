// The guard's challenge, solved in the browser (the server's side and the
// token's form: examples/web/proof.py). Find a NONCE (a decimal number) such
// that SHA-256(SALT + NONCE) starts with BITS zero bits: 2^BITS tries on
// average. Each try hashes one 64-byte block, here in plain JavaScript
// (FIPS 180-4), which works on any page, served over TLS or not, and in
// Chromium runs several times as many tries a second as one
// crypto.subtle.digest call per try. The search runs in slices of a few
// milliseconds so the page keeps drawing its events while it works.
"use strict";

const proofOfWork = (() => {
  // The first 32 bits of the fractional parts of the cube roots of the first 64 primes.
  const K = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);
  const W = new Uint32Array(64);
  const rotr = (x, n) => (x >>> n) | (x << (32 - n));

  // The first 32 bits of SHA-256(TEXT), for ASCII TEXT of at most 55
  // characters (one block with its padding and length).
  function firstWord(text) {
    W.fill(0, 0, 16);
    for (let i = 0; i < text.length; i++) W[i >> 2] |= text.charCodeAt(i) << (24 - 8 * (i & 3));
    W[text.length >> 2] |= 0x80 << (24 - 8 * (text.length & 3));
    W[15] = text.length * 8;
    for (let i = 16; i < 64; i++) {
      const x = W[i - 15], y = W[i - 2];
      W[i] = W[i - 16] + (rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3)) + W[i - 7] + (rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10));
    }
    let a = 0x6a09e667, b = 0xbb67ae85, c = 0x3c6ef372, d = 0xa54ff53a;
    let e = 0x510e527f, f = 0x9b05688c, g = 0x1f83d9ab, h = 0x5be0cd19;
    for (let i = 0; i < 64; i++) {
      const t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    return (0x6a09e667 + a) >>> 0;
  }

  // The challenge TOKEN ("SALT.BITS.EXPIRES.SIGNATURE") solved: resolves to
  // {nonce, tries, ms}, or to null if it has no solution below 10^12 (one
  // chance in e^(10^12 / 2^BITS)).
  async function solve(token) {
    const [salt, bitsText] = token.split(".");
    const bits = Number(bitsText);
    if (!/^[0-9a-f]{32}$/.test(salt) || !(bits >= 1 && bits <= 32)) return null;
    const shift = 32 - bits;
    const started = performance.now();
    let nonce = 0;
    while (nonce < 1e12) {
      const slice = performance.now() + 20;
      do {
        for (const end = nonce + 2000; nonce < end; nonce++) {
          if (firstWord(salt + nonce) >>> shift === 0) {
            return { nonce: String(nonce), tries: nonce + 1, ms: Math.round(performance.now() - started) };
          }
        }
      } while (performance.now() < slice);
      await new Promise((resume) => setTimeout(resume, 0));
    }
    return null;
  }

  return { solve, firstWord };
})();
