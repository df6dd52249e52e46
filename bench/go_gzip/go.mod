module etcdbr/go_gzip

go 1.19
