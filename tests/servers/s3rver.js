// Starts @20minutes/s3rver 4.0.4 (it has no CLI) on loopback for the integration tests:
//   node s3rver.js PORT DIR BUCKET
// Prints "listening ADDRESS:PORT" when ready; SIGTERM ends it within 200 ms (a graceful close
// alone would wait for clients' keep-alive connections, which a server under test never drops). Credentials S3RVER/S3RVER;
// SigV4 signatures are verified. Start with NODE_OPTIONS=--openssl-legacy-provider, or paged
// ListObjectsV2 fails (its continuation tokens use DES).
'use strict';
const S3rver = require('@20minutes/s3rver');
const [port, dir, bucket] = process.argv.slice(2);
const s = new S3rver({
    address: '127.0.0.1',
    port: Number(port),
    directory: dir,
    silent: true,
    configureBuckets: [{ name: bucket, configs: [] }],
});
s.run().then(
    ({ address, port: p }) => console.log(`listening ${address}:${p}`),
    (e) => {
        console.error(`s3rver: ${e.message}`);
        process.exit(1);
    },
);
process.on('SIGTERM', () => {
    s.close().then(() => process.exit(0));
    setTimeout(() => process.exit(0), 200);
});
