module durableclaims.local/peers/killpoint

go 1.26
