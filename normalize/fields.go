package normalize

// The field tables of SHAPES.md "Per endpoint": which members are decimals
// ("dec"), which are prices, and which variant B names variant A renames.
// Members not named here are copied as they are, in the order received.

func itemFields(s Shape) fieldFunc {
	switch s {
	case Activity:
		return activityFields
	case Transfers:
		return transferFields
	case ComboPositions:
		return comboFields
	default:
		return positionFields
	}
}

// activityFields: SHAPES.md 2 (fee arrives as a JSON number).
func activityFields(name []byte) field {
	switch string(name) {
	case "price":
		return field{kind: price}
	case "size", "fee", "usdcSize", "netSharesTransferred":
		return field{kind: dec}
	}
	return field{}
}

// transferFields: SHAPES.md 3; no price.
func transferFields(name []byte) field {
	if string(name) == "amount" {
		return field{kind: dec}
	}
	return field{}
}

// comboFields: SHAPES.md 4.
func comboFields(name []byte) field {
	switch string(name) {
	case "avgPrice", "currentPrice":
		return field{kind: price}
	case "amount", "realizedPnl", "totalBought", "balance", "totalFee",
		"unrealizedPnl", "totalPnl", "percentPnl":
		return field{kind: dec}
	case "legs":
		return field{kind: legs}
	}
	return field{}
}

// legFields: the Leg of SHAPES.md 4, also inside combo fills (SHAPES.md 7).
func legFields(name []byte) field {
	if string(name) == "outcomePrice" {
		return field{kind: price}
	}
	return field{}
}

// positionFields: SHAPES.md 5 and 6.
func positionFields(name []byte) field {
	switch string(name) {
	case "avgPrice", "currentPrice", "avgExit":
		return field{kind: price}
	case "balance", "totalInvested", "totalBought", "value", "unrealizedPnl",
		"realizedPnl", "totalPnl", "percentPnl":
		return field{kind: dec}
	}
	return field{}
}

// Slots of the renamed fill fields (see field.slot).
const (
	_ uint8 = iota
	slotToken
	slotSize
	slotUSDC
	slotTrader
	slotLogo
)

// fillFields: one fill of a transaction, TRADE or COMBO (SHAPES.md 7,
// docs/CONTRACT.md "Transaction detail (variant B)"). The A names are listed too, so
// a fill that already carries one is still rewritten as a decimal and
// cannot produce a duplicate name.
func fillFields(name []byte) field {
	switch string(name) {
	case "assetId":
		return field{rename: `"tokenId"`, slot: slotToken}
	case "tokenId":
		return field{slot: slotToken}
	case "shares":
		return field{kind: dec, rename: `"size"`, slot: slotSize}
	case "size":
		return field{kind: dec, slot: slotSize}
	case "txValue":
		return field{kind: dec, rename: `"usdcSize"`, slot: slotUSDC}
	case "usdcSize":
		return field{kind: dec, slot: slotUSDC}
	case "actor":
		return field{rename: `"traderAddress"`, slot: slotTrader}
	case "traderAddress":
		return field{slot: slotTrader}
	case "marketLogo":
		return field{rename: `"logo"`, slot: slotLogo}
	case "logo":
		return field{slot: slotLogo}
	case "price":
		return field{kind: price}
	case "fee":
		return field{kind: dec}
	case "legs":
		return field{kind: legs}
	}
	return field{}
}
