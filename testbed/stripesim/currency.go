package stripesim

import (
	"slices"
	"strings"
)

// currencies are the ISO 4217 codes Stripe accepts for transfers (lowercase,
// as Stripe returns them). The list mirrors Stripe's supported-currencies
// page; an unknown code gets the same 400 that Stripe gives.
var currencies = []string{
	"aed", "afn", "all", "amd", "ang", "aoa", "ars", "aud", "awg", "azn",
	"bam", "bbd", "bdt", "bgn", "bif", "bmd", "bnd", "bob", "brl", "bsd", "bwp", "byn", "bzd",
	"cad", "cdf", "chf", "clp", "cny", "cop", "crc", "cve", "czk",
	"djf", "dkk", "dop", "dzd", "egp", "etb", "eur",
	"fjd", "fkp", "gbp", "gel", "gip", "gmd", "gnf", "gtq", "gyd",
	"hkd", "hnl", "htg", "huf", "idr", "ils", "inr", "isk",
	"jmd", "jpy", "kes", "kgs", "khr", "kmf", "krw", "kyd", "kzt",
	"lak", "lbp", "lkr", "lrd", "lsl",
	"mad", "mdl", "mga", "mkd", "mmk", "mnt", "mop", "mur", "mvr", "mwk", "mxn", "myr", "mzn",
	"nad", "ngn", "nio", "nok", "npr", "nzd",
	"pab", "pen", "pgk", "php", "pkr", "pln", "pyg", "qar",
	"ron", "rsd", "rub", "rwf",
	"sar", "sbd", "scr", "sek", "sgd", "shp", "sle", "sos", "srd", "std", "szl",
	"thb", "tjs", "top", "try", "ttd", "twd", "tzs",
	"uah", "ugx", "usd", "uyu", "uzs", "vnd", "vuv", "wst",
	"xaf", "xcd", "xof", "xpf", "yer", "zar", "zmw",
}

// normalizeCurrency returns the lowercase code and whether Stripe supports it.
// Stripe accepts codes case-insensitively and always answers in lowercase.
func normalizeCurrency(c string) (string, bool) {
	c = strings.ToLower(c)
	_, found := slices.BinarySearch(currencies, c)
	return c, found
}
