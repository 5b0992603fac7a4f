package storage

import ()

// Opening a database decodes every account, management key, purchase and
// workspace record: at a million keys (100,000 accounts) encoding/json's
// reflection over these 400,000 records was most of the start once the
// keys came from their snapshot. Each has a decoder, generated in package
// record, of the exact form its encoder writes (member order, no white
// space, strings without escapes or non-ASCII bytes, the numbers it
// writes), in one pass without reflection like record.DecodeAPIKeyFast;
// anything else (an older record, a field set that is rare, such as a
// workspace's budgets) is left to encoding/json. What a fast decoder
// accepts it decodes as encoding/json does
// (TestRecordDecodersMatchEncodingJSON, FuzzRecordDecoders).
