"""Wang & Lin (2017): its entries are being written (issue 24); none yet."""
TITLE = "Wang & Lin (2017), Scalable estimation of DP mixture models on distributed data (wang2017)"
SHORT = "Wang & Lin 2017"
CONFIG = "workflows/config/wang2017.yaml"
DIFFERENCES = ""
NOT_ADDRESSED = []


def entries(tables):
    return []
