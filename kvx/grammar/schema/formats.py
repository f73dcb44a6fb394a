"""`format` as regexes over the decoded string (compiled like patterns, so escapes work)."""
from __future__ import annotations

from functools import lru_cache

from kvx.grammar.automata.cdfa import compact
from kvx.grammar.schema.stored_automata import stored

_DEC_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_IPV4 = rf"{_DEC_OCTET}(\.{_DEC_OCTET}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"({_H16}:{_H16}|{_IPV4})"


def _ipv6() -> str:
    """RFC 4291 text forms (RFC 3986 IPv6address), no zone id."""
    h = _H16
    forms = [rf"({h}:){{6}}{_LS32}", rf"::({h}:){{5}}{_LS32}", rf"({h})?::({h}:){{4}}{_LS32}",
             rf"(({h}:){{0,1}}{h})?::({h}:){{3}}{_LS32}", rf"(({h}:){{0,2}}{h})?::({h}:){{2}}{_LS32}",
             rf"(({h}:){{0,3}}{h})?::{h}:{_LS32}", rf"(({h}:){{0,4}}{h})?::{_LS32}",
             rf"(({h}:){{0,5}}{h})?::{h}", rf"(({h}:){{0,6}}{h})?::"]
    return "(" + "|".join(forms) + ")"


_IPV6 = _ipv6()
_YEAR = r"(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"  # 0001-9999, as date.fromisoformat
_LEAP_YEAR = r"([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"  # no 0000
_MONTH_DAY = r"((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
_DATE = rf"({_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_OFFSET = r"([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
_TIME = rf"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?{_OFFSET}"
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = rf"{_LABEL}(\.{_LABEL})*\.?"
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_EMAIL = rf"{_ATEXT}+(\.{_ATEXT}+)*@({_HOSTNAME}|\[({_IPV4}|IPv6:{_IPV6})\])"
_UNRESERVED = r"[A-Za-z0-9._~-]"
_PCT = r"%[0-9A-Fa-f]{2}"
_SUB_DELIMS = r"[!$&'()*+,;=]"
_PCHAR = rf"({_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|[:@])"
_AUTHORITY = rf"(({_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|:)*@)?(\[{_IPV6}\]|({_UNRESERVED}|{_PCT}|{_SUB_DELIMS})*)(:[0-9]*)?"
_URI = (rf"[A-Za-z][A-Za-z0-9+.-]*:(//{_AUTHORITY}(/{_PCHAR}*)*|/({_PCHAR}+(/{_PCHAR}*)*)?|{_PCHAR}+(/{_PCHAR}*)*)?"
        rf"(\?({_PCHAR}|[/?])*)?(#({_PCHAR}|[/?])*)?")

FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}[Tt]{_TIME}",
    "email": _EMAIL,
    "uuid": r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uri": _URI,
    "hostname": _HOSTNAME,
}


@lru_cache(maxsize=None)
def format_dfa(name: str):
    """Automaton of JSON string bodies in format `name`; False for a format we do not know. The
    big ones (email 16k states, uri 12k, ipv6 11k) take up to ~0.4 s to build, so they are kept on
    disk ($KVX_CACHE/grammar/formats, stored_automata.py) and a process loads them in milliseconds."""
    from kvx.grammar.schema.regex_parse import pattern_dfa

    if name not in FORMATS:
        return False
    return stored("formats", name, FORMATS[name],
                  lambda: compact(pattern_dfa(f"^{FORMATS[name]}$", f"format {name}", 50_000)))
