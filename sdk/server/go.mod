module rtcd.dev/sdk/server

go 1.26
