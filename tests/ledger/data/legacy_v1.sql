BEGIN TRANSACTION;
CREATE TABLE candidates (
	sha VARCHAR(64) NOT NULL, 
	parent_sha VARCHAR(64), 
	tree_sha VARCHAR(64) NOT NULL, 
	step INTEGER NOT NULL, 
	idea_id VARCHAR, 
	agent VARCHAR NOT NULL, 
	seq INTEGER NOT NULL, 
	PRIMARY KEY (seq), 
	UNIQUE (sha), 
	FOREIGN KEY(seq) REFERENCES entries (seq)
);
INSERT INTO "candidates" VALUES('86f7e437faa5a7fce15d1ddcb9eaeaea377667b8',NULL,'f8c31c685e17be44d517f776566104c8a3d1506d',1,'idea-a','offline',1);
CREATE TABLE entries (
	seq INTEGER NOT NULL, 
	kind VARCHAR(32) NOT NULL, 
	payload_json TEXT NOT NULL, 
	prev_hash VARCHAR(64) NOT NULL, 
	hash VARCHAR(64) NOT NULL, 
	created_at VARCHAR(40) NOT NULL, 
	PRIMARY KEY (seq)
);
INSERT INTO "entries" VALUES(1,'candidate','{"agent":"offline","cost":{"tokens_in":0.0,"usd":0.0,"wall_s":1.25},"idea_id":"idea-a","message":"try a — ünïcode","parent_sha":null,"prompt_hash":null,"sha":"86f7e437faa5a7fce15d1ddcb9eaeaea377667b8","step":1,"tree_sha":"f8c31c685e17be44d517f776566104c8a3d1506d"}','0000000000000000000000000000000000000000000000000000000000000000','b88952efa87a0bed29e4b150e5b3bdf111aba54425690252b039f3ec032d559d','2026-12-01T15:35:04.734318+00:00');
INSERT INTO "entries" VALUES(2,'fingerprint','{"content":{"driver":"560.1","gpu":"H200","torch":"2.13.0"},"fingerprint_id":"3ec3452d79a4aea07b0c87118c02671757b1a6c403bb2ce13ac8b905453e5d2c"}','b88952efa87a0bed29e4b150e5b3bdf111aba54425690252b039f3ec032d559d','f62e40b33701ac6d9125862ceea74f073f1350bb250253cecf868aed49faf1ef','2026-12-01T15:35:04.734958+00:00');
INSERT INTO "entries" VALUES(3,'measurement','{"arm":"candidate","commit_sha":"86f7e437faa5a7fce15d1ddcb9eaeaea377667b8","config_id":"c0","evaluation_id":"86f7e437faa5a7fce15d1ddcb9eaeaea377667b8:screen","extra":{"blocks":[1,2],"notes":null,"warmup":3},"fingerprint_id":"3ec3452d79a4aea07b0c87118c02671757b1a6c403bb2ce13ac8b905453e5d2c","median_ns":1000.5,"protocol":"interleaved-abba","samples_ns":[1000.5,990.0,1010.25],"stage":"screen"}','f62e40b33701ac6d9125862ceea74f073f1350bb250253cecf868aed49faf1ef','a8ab4e759503dc19ea770cd451443fb0d1e9872a085f829c83651a33524c8330','2026-12-01T15:35:04.735687+00:00');
INSERT INTO "entries" VALUES(4,'verdict','{"candidate_sha":"86f7e437faa5a7fce15d1ddcb9eaeaea377667b8","details":{"speedup":1.07},"objective":0.93,"reason":"faster than parent","stage":"screen","verdict":"accept"}','a8ab4e759503dc19ea770cd451443fb0d1e9872a085f829c83651a33524c8330','68fe1e454ff2aa7bce21f14340b6d200762ae13a97b30948da879a4e29843ff3','2026-12-01T15:35:04.735721+00:00');
INSERT INTO "entries" VALUES(5,'message','{"author":"human","kind":"IDEA","payload":{"priority":1},"text":"unroll the inner loop"}','68fe1e454ff2aa7bce21f14340b6d200762ae13a97b30948da879a4e29843ff3','8d32c10bbc7c9e723c15774d3212c59388c3a548cc7a48ee72a2568ba763ec8a','2026-12-01T15:35:04.735735+00:00');
INSERT INTO "entries" VALUES(6,'event','{"kind":"run_started","payload":{"n":0}}','8d32c10bbc7c9e723c15774d3212c59388c3a548cc7a48ee72a2568ba763ec8a','98618dfcd2a400435c2f863ebcd4d7c94f34e3b10fdcadc9b01a39ac5514e709','2026-12-01T15:35:04.735747+00:00');
CREATE TABLE events (
	kind VARCHAR NOT NULL, 
	seq INTEGER NOT NULL, 
	PRIMARY KEY (seq), 
	FOREIGN KEY(seq) REFERENCES entries (seq)
);
INSERT INTO "events" VALUES('run_started',6);
CREATE TABLE fingerprints (
	fingerprint_id VARCHAR(64) NOT NULL, 
	seq INTEGER NOT NULL, 
	PRIMARY KEY (seq), 
	UNIQUE (fingerprint_id), 
	FOREIGN KEY(seq) REFERENCES entries (seq)
);
INSERT INTO "fingerprints" VALUES('3ec3452d79a4aea07b0c87118c02671757b1a6c403bb2ce13ac8b905453e5d2c',2);
CREATE TABLE measurements (
	evaluation_id VARCHAR NOT NULL, 
	commit_sha VARCHAR NOT NULL, 
	config_id VARCHAR NOT NULL, 
	arm VARCHAR NOT NULL, 
	stage VARCHAR NOT NULL, 
	seq INTEGER NOT NULL, 
	PRIMARY KEY (seq), 
	CONSTRAINT uq_measurements_key UNIQUE (evaluation_id, config_id, arm), 
	FOREIGN KEY(seq) REFERENCES entries (seq)
);
INSERT INTO "measurements" VALUES('86f7e437faa5a7fce15d1ddcb9eaeaea377667b8:screen','86f7e437faa5a7fce15d1ddcb9eaeaea377667b8','c0','candidate','screen',3);
CREATE TABLE messages (
	kind VARCHAR NOT NULL, 
	author VARCHAR NOT NULL, 
	seq INTEGER NOT NULL, 
	PRIMARY KEY (seq), 
	FOREIGN KEY(seq) REFERENCES entries (seq)
);
INSERT INTO "messages" VALUES('IDEA','human',5);
CREATE TABLE schema_info (
	id INTEGER NOT NULL, 
	application VARCHAR(64) NOT NULL, 
	version INTEGER NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT schema_info_single_row CHECK (id = 1)
);
INSERT INTO "schema_info" VALUES(1,'ratchet-ledger',1);
CREATE TABLE verdicts (
	candidate_sha VARCHAR NOT NULL, 
	verdict VARCHAR NOT NULL, 
	stage VARCHAR NOT NULL, 
	seq INTEGER NOT NULL, 
	PRIMARY KEY (seq), 
	FOREIGN KEY(seq) REFERENCES entries (seq)
);
INSERT INTO "verdicts" VALUES('86f7e437faa5a7fce15d1ddcb9eaeaea377667b8','accept','screen',4);
CREATE INDEX ix_entries_kind ON entries (kind);
CREATE INDEX ix_candidates_parent_sha ON candidates (parent_sha);
CREATE INDEX ix_measurements_commit_sha ON measurements (commit_sha);
CREATE INDEX ix_verdicts_candidate_sha ON verdicts (candidate_sha);
CREATE INDEX ix_events_kind ON events (kind);
CREATE TRIGGER ratchet_entries_no_update BEFORE UPDATE ON entries BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: UPDATE on entries refused'); END;
CREATE TRIGGER ratchet_entries_no_delete BEFORE DELETE ON entries BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: DELETE on entries refused'); END;
CREATE TRIGGER ratchet_entries_no_overwrite BEFORE INSERT ON entries WHEN EXISTS (SELECT 1 FROM entries WHERE (seq = NEW.seq)) BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: INSERT over an existing row of entries refused'); END;
CREATE TRIGGER ratchet_schema_info_no_update BEFORE UPDATE ON schema_info BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: UPDATE on schema_info refused'); END;
CREATE TRIGGER ratchet_schema_info_no_delete BEFORE DELETE ON schema_info BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: DELETE on schema_info refused'); END;
CREATE TRIGGER ratchet_schema_info_no_overwrite BEFORE INSERT ON schema_info WHEN EXISTS (SELECT 1 FROM schema_info WHERE (id = NEW.id)) BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: INSERT over an existing row of schema_info refused'); END;
CREATE TRIGGER ratchet_candidates_no_update BEFORE UPDATE ON candidates BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: UPDATE on candidates refused'); END;
CREATE TRIGGER ratchet_candidates_no_delete BEFORE DELETE ON candidates BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: DELETE on candidates refused'); END;
CREATE TRIGGER ratchet_candidates_no_overwrite BEFORE INSERT ON candidates WHEN EXISTS (SELECT 1 FROM candidates WHERE (seq = NEW.seq) OR (sha = NEW.sha)) BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: INSERT over an existing row of candidates refused'); END;
CREATE TRIGGER ratchet_events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: UPDATE on events refused'); END;
CREATE TRIGGER ratchet_events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: DELETE on events refused'); END;
CREATE TRIGGER ratchet_events_no_overwrite BEFORE INSERT ON events WHEN EXISTS (SELECT 1 FROM events WHERE (seq = NEW.seq)) BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: INSERT over an existing row of events refused'); END;
CREATE TRIGGER ratchet_fingerprints_no_update BEFORE UPDATE ON fingerprints BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: UPDATE on fingerprints refused'); END;
CREATE TRIGGER ratchet_fingerprints_no_delete BEFORE DELETE ON fingerprints BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: DELETE on fingerprints refused'); END;
CREATE TRIGGER ratchet_fingerprints_no_overwrite BEFORE INSERT ON fingerprints WHEN EXISTS (SELECT 1 FROM fingerprints WHERE (fingerprint_id = NEW.fingerprint_id) OR (seq = NEW.seq)) BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: INSERT over an existing row of fingerprints refused'); END;
CREATE TRIGGER ratchet_measurements_no_update BEFORE UPDATE ON measurements BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: UPDATE on measurements refused'); END;
CREATE TRIGGER ratchet_measurements_no_delete BEFORE DELETE ON measurements BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: DELETE on measurements refused'); END;
CREATE TRIGGER ratchet_measurements_no_overwrite BEFORE INSERT ON measurements WHEN EXISTS (SELECT 1 FROM measurements WHERE (evaluation_id = NEW.evaluation_id AND config_id = NEW.config_id AND arm = NEW.arm) OR (seq = NEW.seq)) BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: INSERT over an existing row of measurements refused'); END;
CREATE TRIGGER ratchet_messages_no_update BEFORE UPDATE ON messages BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: UPDATE on messages refused'); END;
CREATE TRIGGER ratchet_messages_no_delete BEFORE DELETE ON messages BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: DELETE on messages refused'); END;
CREATE TRIGGER ratchet_messages_no_overwrite BEFORE INSERT ON messages WHEN EXISTS (SELECT 1 FROM messages WHERE (seq = NEW.seq)) BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: INSERT over an existing row of messages refused'); END;
CREATE TRIGGER ratchet_verdicts_no_update BEFORE UPDATE ON verdicts BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: UPDATE on verdicts refused'); END;
CREATE TRIGGER ratchet_verdicts_no_delete BEFORE DELETE ON verdicts BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: DELETE on verdicts refused'); END;
CREATE TRIGGER ratchet_verdicts_no_overwrite BEFORE INSERT ON verdicts WHEN EXISTS (SELECT 1 FROM verdicts WHERE (seq = NEW.seq)) BEGIN SELECT RAISE(ABORT, 'ratchet ledger is append-only: INSERT over an existing row of verdicts refused'); END;
COMMIT;
