"""Scapy layers for the Interlink wire format.

    from scapy.all import rdpcap
    from interlink_scapy import Interlink
    for p in rdpcap("capture.pcap"):
        if Interlink in p:
            print(p[Interlink].type, p[Interlink].global_seq)

Importing the package binds the layers to UDP port 7400 (both directions) and to destination
port 7401 (FEC repairs); bind_port() adds another port.
"""
from .layers import (HEADER_FIELDS, IL_ACK_TFRC_LEN, IL_FEC_CODES, IL_FEC_ID_LEN,
                     IL_FEC_UDP_PORT, IL_FLAGS, IL_HDR_LEN, IL_TYPES, IL_UDP_PORT, IL_VERSION,
                     IL_LEC_ID_LEN, IL_LEC_ORIGINS, ILLecId, ILLecRepair, il_lec_xor,
                     IL_AUTH_OPT_LEN, IL_F_AUTH, ROLE_RECEIVER, ROLE_SENDER, ILAck, ILAuth, ILAckTfrc, ILCredit, ILEpochReport,
                     ILFecId, ILFecRepair, ILMember, ILMsg, ILRange, ILStable, ILView, ILViewMember,
                     ILViewSender, Interlink, bind_port, il_auth_seal, il_data, il_nak)

__version__ = "1.1.0"

__all__ = ["HEADER_FIELDS", "IL_ACK_TFRC_LEN", "IL_FEC_CODES", "IL_FEC_ID_LEN",
           "IL_FEC_UDP_PORT", "IL_FLAGS", "IL_HDR_LEN", "IL_TYPES", "IL_UDP_PORT", "IL_VERSION",
           "IL_LEC_ID_LEN", "IL_LEC_ORIGINS", "ILLecId", "ILLecRepair", "il_lec_xor",
           "IL_AUTH_OPT_LEN", "IL_F_AUTH", "ROLE_RECEIVER", "ROLE_SENDER", "ILAck", "ILAuth", "ILAckTfrc", "ILCredit", "ILEpochReport",
           "ILFecId", "ILFecRepair", "ILMember", "ILMsg", "ILRange", "ILStable", "ILView", "ILViewMember",
           "ILViewSender", "Interlink", "bind_port", "il_auth_seal", "il_data", "il_nak"]
