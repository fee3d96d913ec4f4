-- SPDX-License-Identifier: BSD-3-Clause
--
-- Wireshark / tshark dissector for the Interlink wire format, version 1
-- (include/interlink/wire.h, fec_wire.h, lec_wire.h, docs/wire-format.md).
--
--   tshark -X lua_script:tools/wireshark/interlink.lua -r capture.pcap -Y ilink
--   wireshark -X lua_script:tools/wireshark/interlink.lua capture.pcap
--
-- or copy it to ~/.local/lib/wireshark/plugins/ (Wireshark 4.0 loads it at start).
-- It decodes every field of every message type: the common header and its
-- flags, DATA's packed messages, NAK and UNAVAIL ranges, both ACK forms,
-- STABLE, JOIN/LEAVE/HEARTBEAT, VIEW with its member and sender lists, CREDIT,
-- EPOCH_REPORT, FEC repairs with their recipes and LEC repairs with their ids;
-- FTCP_LOG (no body format yet) shows its body as bytes. Malformed frames get expert info naming what
-- is wrong, as the appliance's drop counters would.
--
-- Filter fields are ilink.<header field> and ilink.<body>.<field>, e.g.
-- ilink.type == 2, ilink.global_seq >= 100, ilink.view.member.member_id,
-- ilink.fec.id.src. Wireshark ships an unrelated "interlink" protocol, hence
-- the name "ilink". Ports: UDP 7400 (native traffic, both directions) and
-- 7401 (FEC repairs), changeable in the protocol's preferences.

local ilink = Proto("ilink", "Interlink")

local IL_VERSION = 1
local IL_HDR_LEN = 40

local types = {
	[1] = "DATA", [2] = "NAK", [3] = "UNAVAIL", [4] = "ACK", [5] = "STABLE",
	[6] = "JOIN", [7] = "LEAVE", [8] = "HEARTBEAT", [9] = "VIEW", [10] = "CREDIT",
	[11] = "FEC_REPAIR", [12] = "LEC_REPAIR", [13] = "FTCP_LOG",
	[14] = "EPOCH_REPORT",
}
local fec_codes = { [1] = "XOR", [2] = "RS" }
local lec_origins = { [0] = "MEMBER", [1] = "APPLIANCE" }

local F = {
	-- common header
	version = ProtoField.uint8("ilink.version", "Version", base.DEC),
	type = ProtoField.uint8("ilink.type", "Type", base.DEC, types),
	hdr_len = ProtoField.uint8("ilink.hdr_len", "Header length", base.DEC),
	flags = ProtoField.uint8("ilink.flags", "Flags", base.HEX),
	f_stamped = ProtoField.bool("ilink.flags.stamped", "STAMPED", 8, nil, 0x01,
		"epoch and global_seq were set by the appliance"),
	f_retrans = ProtoField.bool("ilink.flags.retrans", "RETRANS", 8, nil, 0x02),
	f_stable_valid = ProtoField.bool("ilink.flags.stable_valid", "STABLE_VALID", 8, nil, 0x04,
		"stable_seq carries a watermark"),
	f_raw = ProtoField.bool("ilink.flags.raw", "RAW", 8, nil, 0x08,
		"header inserted by the appliance (raw mode)"),
	f_fifo_start = ProtoField.bool("ilink.flags.fifo_start", "FIFO_START", 8, nil, 0x10,
		"first frame of a sender's new incarnation: its FIFO restarts here"),
	f_auth = ProtoField.bool("ilink.flags.auth", "AUTH", 8, nil, 0x20,
		"control message: the header carries the AUTH option (key id, counter, MAC)"),
	f_reserved = ProtoField.uint8("ilink.flags.reserved", "Reserved bits", base.HEX, nil, 0xc0),
	group_id = ProtoField.uint16("ilink.group_id", "Group", base.DEC),
	msg_count = ProtoField.uint16("ilink.msg_count", "Message count", base.DEC),
	sender_id = ProtoField.uint32("ilink.sender_id", "Sender", base.DEC),
	epoch = ProtoField.uint32("ilink.epoch", "Epoch", base.DEC),
	sender_seq = ProtoField.uint64("ilink.sender_seq", "Sender sequence", base.DEC),
	global_seq = ProtoField.uint64("ilink.global_seq", "Global sequence", base.DEC),
	stable_seq = ProtoField.uint64("ilink.stable_seq", "Stable sequence", base.DEC),
	options = ProtoField.bytes("ilink.options", "Header options"),
	-- the AUTH option (flag AUTH), the first 28 bytes of the options
	auth_key_id = ProtoField.uint32("ilink.auth.key_id", "Key id", base.DEC),
	auth_counter = ProtoField.uint64("ilink.auth.counter", "Counter", base.DEC),
	auth_mac = ProtoField.bytes("ilink.auth.mac", "MAC"),
	-- DATA: packed messages
	msg = ProtoField.none("ilink.msg", "Message"),
	msg_len = ProtoField.uint16("ilink.msg.len", "Length", base.DEC),
	msg_flags = ProtoField.uint16("ilink.msg.msg_flags", "Message flags", base.HEX),
	msg_data = ProtoField.bytes("ilink.msg.data", "Data"),
	msg_gseq = ProtoField.uint64("ilink.msg.global_seq", "Global sequence of this message",
		base.DEC),
	-- NAK and UNAVAIL
	first_seq = ProtoField.uint64("ilink.range.first_seq", "First sequence", base.DEC),
	last_seq = ProtoField.uint64("ilink.range.last_seq", "Last sequence", base.DEC),
	-- ACK (short and long form)
	ack_view = ProtoField.uint32("ilink.ack.view_id", "View", base.DEC),
	ack_free = ProtoField.uint32("ilink.ack.buffer_free", "Buffer free", base.DEC,
		{ [0xffffffff] = "no limit" }),
	ack_echo = ProtoField.uint64("ilink.ack.echo_seq", "Echoed sequence", base.DEC),
	ack_delta = ProtoField.uint32("ilink.ack.delta_us", "Hold time (us)", base.DEC),
	ack_ppm = ProtoField.uint32("ilink.ack.loss_ppm", "Loss-event rate (ppm)", base.DEC),
	ack_extra = ProtoField.bytes("ilink.ack.ignored", "Ignored bytes"),
	-- STABLE
	stable_view = ProtoField.uint32("ilink.stable.view_id", "View", base.DEC),
	stable_res = ProtoField.uint32("ilink.stable.reserved", "Reserved", base.HEX),
	-- JOIN, LEAVE, HEARTBEAT
	member_roles = ProtoField.uint32("ilink.member.roles", "Roles", base.HEX),
	member_inc = ProtoField.uint32("ilink.member.incarnation", "Incarnation", base.DEC),
	role_sender = ProtoField.bool("ilink.roles.sender", "Sender", 32, nil, 0x1),
	role_receiver = ProtoField.bool("ilink.roles.receiver", "Receiver", 32, nil, 0x2),
	-- VIEW
	view_id = ProtoField.uint32("ilink.view.view_id", "View", base.DEC),
	view_nm = ProtoField.uint16("ilink.view.n_members", "Members", base.DEC),
	view_ns = ProtoField.uint16("ilink.view.n_senders", "Senders", base.DEC),
	vm = ProtoField.none("ilink.view.member", "Member"),
	vm_id = ProtoField.uint32("ilink.view.member.member_id", "Member", base.DEC),
	vm_roles = ProtoField.uint32("ilink.view.member.roles", "Roles", base.HEX),
	vs = ProtoField.none("ilink.view.sender", "Sender"),
	vs_id = ProtoField.uint32("ilink.view.sender.sender_id", "Sender", base.DEC),
	vs_inc = ProtoField.uint32("ilink.view.sender.incarnation", "Incarnation", base.DEC),
	vs_next = ProtoField.uint64("ilink.view.sender.next_sender_seq", "Next sender sequence",
		base.DEC),
	-- CREDIT
	cr_limit = ProtoField.uint64("ilink.credit.limit_seq", "Limit", base.DEC),
	cr_window = ProtoField.uint32("ilink.credit.window", "Window", base.DEC),
	cr_rate = ProtoField.uint32("ilink.credit.rate_kbps", "Rate (kbit/s)", base.DEC),
	-- EPOCH_REPORT
	er_new = ProtoField.uint32("ilink.epoch_report.new_epoch", "New epoch", base.DEC),
	er_view = ProtoField.uint32("ilink.epoch_report.view_id", "View", base.DEC),
	er_stable = ProtoField.uint64("ilink.epoch_report.stable_seen", "Watermark seen", base.DEC),
	er_high = ProtoField.uint64("ilink.epoch_report.high", "Highest held + 1", base.DEC),
	-- FEC_REPAIR
	fec_code = ProtoField.uint8("ilink.fec.code", "Code", base.DEC, fec_codes),
	fec_layer = ProtoField.uint8("ilink.fec.layer", "Layer", base.DEC),
	fec_r = ProtoField.uint8("ilink.fec.rate_r", "r", base.DEC),
	fec_c = ProtoField.uint8("ilink.fec.rate_c", "c", base.DEC),
	fec_count = ProtoField.uint8("ilink.fec.count", "Recipe entries", base.DEC),
	fec_id_len = ProtoField.uint8("ilink.fec.id_len", "Entry length", base.DEC),
	fec_il = ProtoField.uint16("ilink.fec.interleave", "Interleave", base.DEC),
	fec_xor_len = ProtoField.uint16("ilink.fec.xor_len", "Repair data length", base.DEC),
	fec_len_code = ProtoField.uint16("ilink.fec.len_code", "Length code", base.HEX),
	fec_res = ProtoField.uint32("ilink.fec.reserved", "Reserved", base.HEX),
	fec_x_first = ProtoField.uint64("ilink.fec.x_first", "First packet number", base.DEC),
	fid = ProtoField.none("ilink.fec.id", "Recipe entry"),
	fid_src = ProtoField.ipv4("ilink.fec.id.src", "Source"),
	fid_dst = ProtoField.ipv4("ilink.fec.id.dst", "Destination"),
	fid_ip_id = ProtoField.uint16("ilink.fec.id.ip_id", "IP id", base.HEX),
	fid_ip_len = ProtoField.uint16("ilink.fec.id.ip_len", "IP total length", base.DEC),
	fid_csum = ProtoField.uint32("ilink.fec.id.csum", "Payload check", base.HEX),
	fid_pkt = ProtoField.uint64("ilink.fec.id.packet", "Packet number", base.DEC),
	fec_data = ProtoField.bytes("ilink.fec.data", "Repair data"),
	-- LEC_REPAIR
	lec_count = ProtoField.uint8("ilink.lec.count", "Ids", base.DEC),
	lec_id_len = ProtoField.uint8("ilink.lec.id_len", "Id length", base.DEC),
	lec_r = ProtoField.uint8("ilink.lec.rate_r", "r", base.DEC),
	lec_origin = ProtoField.uint8("ilink.lec.origin", "Origin", base.DEC, lec_origins),
	lec_len = ProtoField.uint16("ilink.lec.len", "Repair data length", base.DEC),
	lec_len_xor = ProtoField.uint16("ilink.lec.len_xor", "Length XOR", base.HEX),
	lid = ProtoField.none("ilink.lec.id", "Id"),
	lid_group = ProtoField.uint16("ilink.lec.id.group", "Group", base.DEC),
	lid_res = ProtoField.uint16("ilink.lec.id.reserved", "Reserved", base.HEX),
	lid_epoch = ProtoField.uint32("ilink.lec.id.epoch", "Epoch", base.DEC),
	lid_seq = ProtoField.uint64("ilink.lec.id.seq", "Global sequence", base.DEC),
	lec_data = ProtoField.bytes("ilink.lec.data", "Repair data"),
	-- reserved types, and anything after a body
	body = ProtoField.bytes("ilink.body", "Body"),
	trailing = ProtoField.bytes("ilink.trailing", "Trailing bytes"),
}
local fields = {}
for _, f in pairs(F) do
	fields[#fields + 1] = f
end
ilink.fields = fields

local E = {
	version = ProtoExpert.new("ilink.bad_version", "Unknown version (drop_bad_version)",
		expert.group.MALFORMED, expert.severity.ERROR),
	short = ProtoExpert.new("ilink.short", "Shorter than the 40-byte header",
		expert.group.MALFORMED, expert.severity.ERROR),
	hdr_len = ProtoExpert.new("ilink.bad_hdr_len",
		"hdr_len below 40, not a multiple of 4 or past the datagram (drop_bad_hdr_len)",
		expert.group.MALFORMED, expert.severity.ERROR),
	flags = ProtoExpert.new("ilink.bad_flags", "Reserved flag bits set (drop_bad_flags)",
		expert.group.MALFORMED, expert.severity.ERROR),
	type = ProtoExpert.new("ilink.unknown_type", "Unknown message type (drop_unknown_type)",
		expert.group.MALFORMED, expert.severity.ERROR),
	packing = ProtoExpert.new("ilink.bad_packing",
		"Messages do not end at the end of the datagram (drop_bad_packing / " ..
		"drop_truncated_packing)", expert.group.MALFORMED, expert.severity.ERROR),
	body = ProtoExpert.new("ilink.bad_body", "Body shorter than its type needs (drop_bad_body)",
		expert.group.MALFORMED, expert.severity.ERROR),
	nak = ProtoExpert.new("ilink.bad_nak", "first_seq is 0 or above last_seq (drop_bad_nak)",
		expert.group.MALFORMED, expert.severity.WARN),
}
ilink.experts = { E.version, E.short, E.hdr_len, E.flags, E.type, E.packing, E.body, E.nak }

ilink.prefs.port = Pref.uint("UDP port", 7400, "Port of native Interlink traffic (udp_port)")
ilink.prefs.fec_port = Pref.uint("FEC UDP port", 7401, "Port of FEC repairs (fec stage 'port')")

-- Adds `f` over `len` bytes at `off` if they are there; returns the end offset or nil.
local function need(tvb, tree, off, len)
	if off + len > tvb:len() then
		tree:add_proto_expert_info(E.body)
		return nil
	end
	return off + len
end

local function add_roles(tree, field, range)
	local t = tree:add(field, range)
	t:add(F.role_sender, range)
	t:add(F.role_receiver, range)
end

local function dissect_data(tvb, tree, off, count, gseq)
	local n = 0
	while n < count do
		if off + 4 > tvb:len() then
			tree:add_proto_expert_info(E.packing, "message " .. n .. " of " .. count ..
				" runs past the datagram (drop_truncated_packing)")
			return off
		end
		local len = tvb(off, 2):uint()
		if off + 4 + len > tvb:len() then
			tree:add_proto_expert_info(E.packing, "message " .. n .. " of " .. count ..
				" runs past the datagram (drop_truncated_packing)")
			return off
		end
		local t = tree:add(F.msg, tvb(off, 4 + len))
		t:append_text(" " .. n .. " (" .. len .. " bytes)")
		t:add(F.msg_len, tvb(off, 2))
		t:add(F.msg_flags, tvb(off + 2, 2))
		if len > 0 then
			t:add(F.msg_data, tvb(off + 4, len))
		end
		if gseq ~= nil then
			t:add(F.msg_gseq, tvb(off, 0), gseq + n):set_generated()
		end
		off = off + 4 + len
		n = n + 1
	end
	if off < tvb:len() then
		tree:add_proto_expert_info(E.packing, (tvb:len() - off) ..
			" bytes after the last message (drop_bad_packing)")
	end
	return off
end

local function dissect_fec(tvb, tree, off)
	if not need(tvb, tree, off, 24) then
		return tvb:len()
	end
	tree:add(F.fec_code, tvb(off, 1))
	tree:add(F.fec_layer, tvb(off + 1, 1))
	tree:add(F.fec_r, tvb(off + 2, 1))
	tree:add(F.fec_c, tvb(off + 3, 1))
	tree:add(F.fec_count, tvb(off + 4, 1))
	tree:add(F.fec_id_len, tvb(off + 5, 1))
	tree:add(F.fec_il, tvb(off + 6, 2))
	tree:add(F.fec_xor_len, tvb(off + 8, 2))
	tree:add(F.fec_len_code, tvb(off + 10, 2))
	tree:add(F.fec_res, tvb(off + 12, 4))
	tree:add(F.fec_x_first, tvb(off + 16, 8))
	local count, id_len = tvb(off + 4, 1):uint(), tvb(off + 5, 1):uint()
	local il, xor_len = tvb(off + 6, 2):uint(), tvb(off + 8, 2):uint()
	local x_first = tvb(off + 16, 8):uint64()
	off = off + 24
	if id_len < 16 then
		tree:add_proto_expert_info(E.body, "recipe entries of " .. id_len .. " bytes (16 expected)")
		return tvb:len()
	end
	for k = 0, count - 1 do
		if not need(tvb, tree, off, id_len) then
			return tvb:len()
		end
		local t = tree:add(F.fid, tvb(off, id_len))
		t:append_text(" " .. k)
		t:add(F.fid_src, tvb(off, 4))
		t:add(F.fid_dst, tvb(off + 4, 4))
		t:add(F.fid_ip_id, tvb(off + 8, 2))
		t:add(F.fid_ip_len, tvb(off + 10, 2))
		t:add(F.fid_csum, tvb(off + 12, 4))
		t:add(F.fid_pkt, tvb(off, 0), x_first + k * il):set_generated()
		off = off + id_len
	end
	if xor_len > 0 then
		if not need(tvb, tree, off, xor_len) then
			return tvb:len()
		end
		tree:add(F.fec_data, tvb(off, xor_len))
	end
	return off + xor_len
end

local function dissect_lec(tvb, tree, off)
	if not need(tvb, tree, off, 8) then
		return tvb:len(), ""
	end
	tree:add(F.lec_count, tvb(off, 1))
	tree:add(F.lec_id_len, tvb(off + 1, 1))
	tree:add(F.lec_r, tvb(off + 2, 1))
	tree:add(F.lec_origin, tvb(off + 3, 1))
	tree:add(F.lec_len, tvb(off + 4, 2))
	tree:add(F.lec_len_xor, tvb(off + 6, 2))
	local count, id_len, len = tvb(off, 1):uint(), tvb(off + 1, 1):uint(), tvb(off + 4, 2):uint()
	local info = " " .. count .. " ids from " .. (lec_origins[tvb(off + 3, 1):uint()] or "?")
	off = off + 8
	if id_len ~= 16 or count == 0 or count > 32 or len == 0 then
		tree:add_proto_expert_info(E.body, "count " .. count .. ", id_len " .. id_len ..
			", len " .. len .. " (1..32 ids of 16 bytes, len >= 1 expected)")
		if id_len ~= 16 then
			return tvb:len(), info
		end
	end
	for k = 0, count - 1 do
		if not need(tvb, tree, off, 16) then
			return tvb:len(), info
		end
		local t = tree:add(F.lid, tvb(off, 16))
		t:append_text(" " .. k .. ": group " .. tvb(off, 2):uint() .. " seq " ..
			tostring(tvb(off + 8, 8):uint64()))
		t:add(F.lid_group, tvb(off, 2))
		t:add(F.lid_res, tvb(off + 2, 2))
		t:add(F.lid_epoch, tvb(off + 4, 4))
		t:add(F.lid_seq, tvb(off + 8, 8))
		off = off + 16
	end
	if len > 0 then
		if not need(tvb, tree, off, len) then
			return tvb:len(), info
		end
		tree:add(F.lec_data, tvb(off, len))
	end
	return off + len, info
end

-- The body after the header; returns where it ends and a summary for the Info column.
local function dissect_body(tvb, tree, t, off, gseq)
	local left = tvb:len() - off
	if t == 2 or t == 3 then
		if not need(tvb, tree, off, 16) then
			return tvb:len(), ""
		end
		tree:add(F.first_seq, tvb(off, 8))
		tree:add(F.last_seq, tvb(off + 8, 8))
		local a, b = tvb(off, 8):uint64(), tvb(off + 8, 8):uint64()
		if t == 2 and (a == UInt64.new(0) or a > b) then
			tree:add_proto_expert_info(E.nak)
		end
		return off + 16, " " .. tostring(a) .. "-" .. tostring(b)
	elseif t == 4 then
		if not need(tvb, tree, off, 8) then
			return tvb:len(), ""
		end
		tree:add(F.ack_view, tvb(off, 4))
		tree:add(F.ack_free, tvb(off + 4, 4))
		-- The body's length says which form it is (wire.h, il_ack_tfrc).
		if left >= 24 then
			tree:add(F.ack_echo, tvb(off + 8, 8))
			tree:add(F.ack_delta, tvb(off + 16, 4))
			tree:add(F.ack_ppm, tvb(off + 20, 4))
			return off + 24, " next " .. tostring(gseq) .. " (long form)"
		end
		if left > 8 then
			tree:add(F.ack_extra, tvb(off + 8, left - 8))
			return tvb:len(), " next " .. tostring(gseq)
		end
		return off + 8, " next " .. tostring(gseq)
	elseif t == 5 then
		if not need(tvb, tree, off, 8) then
			return tvb:len(), ""
		end
		tree:add(F.stable_view, tvb(off, 4))
		tree:add(F.stable_res, tvb(off + 4, 4))
		return off + 8, ""
	elseif t >= 6 and t <= 8 then
		if not need(tvb, tree, off, 8) then
			return tvb:len(), ""
		end
		add_roles(tree, F.member_roles, tvb(off, 4))
		tree:add(F.member_inc, tvb(off + 4, 4))
		return off + 8, ""
	elseif t == 9 then
		if not need(tvb, tree, off, 8) then
			return tvb:len(), ""
		end
		tree:add(F.view_id, tvb(off, 4))
		tree:add(F.view_nm, tvb(off + 4, 2))
		tree:add(F.view_ns, tvb(off + 6, 2))
		local nm, ns = tvb(off + 4, 2):uint(), tvb(off + 6, 2):uint()
		local info = " " .. tvb(off, 4):uint() .. ": " .. nm .. " members, " .. ns .. " senders"
		off = off + 8
		for i = 0, nm - 1 do
			if not need(tvb, tree, off, 8) then
				return tvb:len(), info
			end
			local m = tree:add(F.vm, tvb(off, 8))
			m:append_text(" " .. i)
			m:add(F.vm_id, tvb(off, 4))
			add_roles(m, F.vm_roles, tvb(off + 4, 4))
			off = off + 8
		end
		for i = 0, ns - 1 do
			if not need(tvb, tree, off, 16) then
				return tvb:len(), info
			end
			local s = tree:add(F.vs, tvb(off, 16))
			s:append_text(" " .. i)
			s:add(F.vs_id, tvb(off, 4))
			s:add(F.vs_inc, tvb(off + 4, 4))
			s:add(F.vs_next, tvb(off + 8, 8))
			off = off + 16
		end
		return off, info
	elseif t == 10 then
		if not need(tvb, tree, off, 16) then
			return tvb:len(), ""
		end
		tree:add(F.cr_limit, tvb(off, 8))
		tree:add(F.cr_window, tvb(off + 8, 4))
		tree:add(F.cr_rate, tvb(off + 12, 4))
		return off + 16, " limit " .. tostring(tvb(off, 8):uint64())
	elseif t == 11 then
		return dissect_fec(tvb, tree, off), ""
	elseif t == 12 then
		return dissect_lec(tvb, tree, off)
	elseif t == 14 then
		if not need(tvb, tree, off, 24) then
			return tvb:len(), ""
		end
		tree:add(F.er_new, tvb(off, 4))
		tree:add(F.er_view, tvb(off + 4, 4))
		tree:add(F.er_stable, tvb(off + 8, 8))
		tree:add(F.er_high, tvb(off + 16, 8))
		return off + 24, " new epoch " .. tvb(off, 4):uint()
	end
	-- FTCP_LOG: no body format yet.
	if left > 0 then
		tree:add(F.body, tvb(off, left))
	end
	return tvb:len(), ""
end

function ilink.dissector(tvb, pinfo, root)
	pinfo.cols.protocol:set("Interlink")
	local tree = root:add(ilink, tvb())
	if tvb:len() < IL_HDR_LEN then
		tree:add_proto_expert_info(E.short)
		pinfo.cols.info:set("Interlink, short frame")
		return tvb:len()
	end
	local version = tvb(0, 1):uint()
	local t = tvb(1, 1):uint()
	local hl = tvb(2, 1):uint()
	local flags = tvb(3, 1):uint()
	local v = tree:add(F.version, tvb(0, 1))
	if version ~= IL_VERSION then
		v:add_proto_expert_info(E.version)
	end
	local ti = tree:add(F.type, tvb(1, 1))
	if types[t] == nil then
		ti:add_proto_expert_info(E.type)
	end
	local hi = tree:add(F.hdr_len, tvb(2, 1))
	local ok_hl = hl >= IL_HDR_LEN and hl % 4 == 0 and hl <= tvb:len()
	if not ok_hl then
		hi:add_proto_expert_info(E.hdr_len)
	end
	local fl = tree:add(F.flags, tvb(3, 1))
	fl:add(F.f_stamped, tvb(3, 1))
	fl:add(F.f_retrans, tvb(3, 1))
	fl:add(F.f_stable_valid, tvb(3, 1))
	fl:add(F.f_raw, tvb(3, 1))
	fl:add(F.f_fifo_start, tvb(3, 1))
	fl:add(F.f_auth, tvb(3, 1))
	fl:add(F.f_reserved, tvb(3, 1))
	local auth = bit.band(flags, 0x20) ~= 0
	if bit.band(flags, 0xc0) ~= 0 or (auth and t == 1) then
		fl:add_proto_expert_info(E.flags)
	end
	tree:add(F.group_id, tvb(4, 2))
	tree:add(F.msg_count, tvb(6, 2))
	tree:add(F.sender_id, tvb(8, 4))
	tree:add(F.epoch, tvb(12, 4))
	tree:add(F.sender_seq, tvb(16, 8))
	tree:add(F.global_seq, tvb(24, 8))
	tree:add(F.stable_seq, tvb(32, 8))
	local group, count = tvb(4, 2):uint(), tvb(6, 2):uint()
	local sender, gseq = tvb(8, 4):uint(), tvb(24, 8):uint64()
	local name = types[t] or ("type " .. t)
	tree:append_text(", " .. name .. ", group " .. group)
	if not ok_hl then
		pinfo.cols.info:set("Interlink " .. name .. ", bad hdr_len " .. hl)
		return tvb:len()
	end
	if auth and hl >= IL_HDR_LEN + 28 then
		tree:add(F.auth_key_id, tvb(40, 4))
		tree:add(F.auth_counter, tvb(44, 8))
		tree:add(F.auth_mac, tvb(52, 16))
		if hl > IL_HDR_LEN + 28 then
			tree:add(F.options, tvb(IL_HDR_LEN + 28, hl - IL_HDR_LEN - 28))
		end
	elseif hl > IL_HDR_LEN then
		tree:add(F.options, tvb(IL_HDR_LEN, hl - IL_HDR_LEN))
	end
	local info = name .. " group " .. group .. " sender " .. sender
	local stamped = bit.band(flags, 0x01) ~= 0
	local off = hl
	if t == 1 then
		if count == 0 or count > 4096 then
			tree:add_proto_expert_info(E.packing, "msg_count " .. count ..
				" is not 1 to 4096 (drop_bad_packing)")
		end
		off = dissect_data(tvb, tree, hl, count, stamped and gseq or nil)
		if stamped and count > 0 then
			info = info .. " seq " .. tostring(gseq) .. "-" .. tostring(gseq + count - 1)
		else
			info = info .. " sender_seq " .. tostring(tvb(16, 8):uint64())
		end
		info = info .. " (" .. count .. " msg" .. (count == 1 and "" or "s") .. ")"
	elseif types[t] ~= nil then
		local extra
		off, extra = dissect_body(tvb, tree, t, hl, gseq)
		info = info .. extra
	elseif tvb:len() > hl then
		tree:add(F.body, tvb(hl, tvb:len() - hl))
		off = tvb:len()
	end
	if off < tvb:len() and t ~= 1 then
		tree:add(F.trailing, tvb(off, tvb:len() - off))
	end
	if bit.band(flags, 0x02) ~= 0 then
		info = info .. " [RETRANS]"
	end
	if bit.band(flags, 0x04) ~= 0 then
		info = info .. " stable<" .. tostring(tvb(32, 8):uint64())
	end
	pinfo.cols.info:set(info)
	return tvb:len()
end

local registered = {}
local function register_ports()
	local udp = DissectorTable.get("udp.port")
	for _, p in ipairs(registered) do
		udp:remove(p, ilink)
	end
	registered = { ilink.prefs.port, ilink.prefs.fec_port }
	for _, p in ipairs(registered) do
		udp:add(p, ilink)
	end
end

function ilink.prefs_changed()
	register_ports()
end

register_ports()
